"""The verdicts are on the first screen of the demo's health.html, in its static HTML (no JavaScript needed), as a
real headless Chromium renders it. Skips where chromium is absent unless GPUHARNESS_REQUIRE_CHROMIUM=1."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

#: appended to a copy of the report: after layout, the verdict heading's bottom edge, in CSS pixels, as an attribute
MEASURE = ("<script>window.addEventListener('load', () => { const e = document.querySelector('SELECTOR');"
           " document.body.setAttribute('data-verdict-bottom',"
           " e ? Math.round(e.getBoundingClientRect().bottom) : -1); });</script>")


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("GPUHARNESS_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is required (GPUHARNESS_REQUIRE_CHROMIUM=1): apt-get install -y chromium")
        pytest.skip("chromium is not installed (apt-get install -y chromium)")
    return found


def rendered(browser: str, page: Path) -> str:
    done = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,900",
                           "--virtual-time-budget=5000", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


@pytest.fixture(scope="module")
def demo_reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The reports of one demo run, shared by this module's tests (the demo runs once, not per report)."""
    workdir = tmp_path_factory.mktemp("demo")
    done = subprocess.run([sys.executable, "-m", "gpuharness", "demo", "--workdir", str(workdir)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return workdir / "reports"


@pytest.mark.slow
def test_health_html_opens_with_its_verdicts(demo_reports: Path, tmp_path: Path) -> None:
    browser = chromium()
    report = demo_reports / "health.html"
    static = report.read_text("utf-8")
    assert re.search(r'<tr class="gpuharness-verdict"><td[^>]*>dep_h3_vast_01</td><td[^>]*>READY<', static), \
        "health.html's static HTML lacks the READY row of dep_h3_vast_01"
    assert re.search(r'dep_h3_vast_02</td><td[^>]*>NOT READY</td><td[^>]*>power_cap<', static)
    assert re.search(r'dep_h3_runpod_01</td><td[^>]*>NOT READY</td><td[^>]*>cuda_oom<', static)
    dom, bottom = first_screen_bottom(browser, report, tmp_path, "#gpuharness-verdict + table")
    assert "NOT READY" in dom and "power_cap" in dom
    assert 0 < bottom <= 900, f"the verdict table ends at {bottom} px: not on the first screen"


def first_screen_bottom(browser: str, report: Path, tmp_path: Path, selector: str) -> tuple[str, int]:
    """The rendered DOM of a copy of the report, and where the element `selector` ends (CSS px from the top)."""
    probe = tmp_path / f"measured-{report.name}"
    probe.write_text(report.read_text("utf-8").replace("</body>", MEASURE.replace("SELECTOR", selector) + "</body>"),
                     "utf-8")
    dom = rendered(browser, probe)
    found = re.search(r'data-verdict-bottom="(-?\d+)"', dom)
    assert found, f"the rendered {report.name} did not measure its verdict"
    return dom, int(found.group(1))


@pytest.mark.slow
def test_audit_html_opens_with_its_verdict_and_spend(demo_reports: Path, tmp_path: Path) -> None:
    browser = chromium()
    report = demo_reports / "audit.html"
    static = report.read_text("utf-8")
    assert re.search(r'id="gpuharness-verdict"[^>]*>Verdict: PASSED: \d+ audit checks<', static), \
        "audit.html's static HTML lacks its verdict"
    assert "gh-verdict" in static and "Registry <code>" in static, "audit.html lacks its spend summary"
    assert static.index("gpuharness-verdict") < static.index("gh-verdict"), "the verdict comes first"
    spend = re.search(r"<b>Billed \$([\d,.]+)</b>[^<]*<b>used \$([\d,.]+)</b>[^<]*<b>idle \$([\d,.]+)</b>", static)
    assert spend, "audit.html lacks the spend summary: billed, used and idle"
    billed, used, idle = (float(x.replace(",", "")) for x in spend.groups())
    assert billed > used > 0 and idle == pytest.approx(billed - used, abs=2e-4)
    assert static.index("gpuharness-verdict") < static.index("gh-spend-total") < static.index("Spend by month")
    # the spend line follows the verdict: where it ends on the screen, both are above
    dom, bottom = first_screen_bottom(browser, report, tmp_path, ".gh-spend-total")
    assert "Verdict: PASSED" in dom and "idle $" in dom
    assert 0 < bottom <= 900, f"audit.html's verdict and spend end at {bottom} px: not on the first screen"
