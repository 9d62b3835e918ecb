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
MEASURE = ("<script>window.addEventListener('load', () => { const v = document.getElementById('gpuharness-verdict');"
           " document.body.setAttribute('data-verdict-bottom', v ? Math.round(v.parentElement.querySelector('table')"
           ".getBoundingClientRect().bottom) : -1); });</script>")


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


@pytest.mark.slow
def test_health_html_opens_with_its_verdicts(tmp_path: Path) -> None:
    browser = chromium()
    done = subprocess.run([sys.executable, "-m", "gpuharness", "demo", "--workdir", str(tmp_path / "demo")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = tmp_path / "demo" / "reports" / "health.html"
    static = report.read_text("utf-8")
    assert re.search(r'<tr class="gpuharness-verdict"><td[^>]*>dep_h3_vast_01</td><td[^>]*>READY<', static), \
        "health.html's static HTML lacks the READY row of dep_h3_vast_01"
    assert re.search(r'dep_h3_vast_02</td><td[^>]*>NOT READY</td><td[^>]*>power_cap<', static)
    assert re.search(r'dep_h3_runpod_01</td><td[^>]*>NOT READY</td><td[^>]*>cuda_oom<', static)
    probe = tmp_path / "measured.html"
    probe.write_text(static.replace("</body>", MEASURE + "</body>"), "utf-8")
    dom = rendered(browser, probe)
    assert "NOT READY" in dom and "power_cap" in dom
    bottom = re.search(r'data-verdict-bottom="(-?\d+)"', dom)
    assert bottom, "the rendered page did not measure its verdict table"
    assert 0 < int(bottom.group(1)) <= 900, f"the verdict table ends at {bottom.group(1)} px: not on the first screen"
