"""Every check suite writes reports/<suite>-<UTC time>.html (self-contained) and .xml (JUnit) unless the user
asked for their own; the audit report opens with the spend chart and the spend tables."""

from __future__ import annotations

import base64
import json
import re
import shutil
import xml.etree.ElementTree as ET
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

# pytester restores sys.modules after each in-process run; a C extension (Pillow's, for the chart) is best imported
# once per process, and hypothesis' plugin imports itself at the end of every run: import them once, here.
import hypothesis  # noqa: F401
import PIL.Image  # noqa: F401
import pytest
from checkout import ROOT

from gpuharness.pytest_plugin.reports import report_paths, suite_name

CHECKS = ROOT / "checks" / "audit"
DEMO = ROOT / "fixtures" / "demo" / ".pi" / "gpu"


@pytest.fixture
def reg(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("GPUHARNESS_AUDIT_NOW", "2026-11-30T18:10:00Z")
    target = pytester.path / "reg"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("audit", "*.lock"))
    return target


def reports(pytester: pytest.Pytester, suffix: str) -> list[Path]:
    return sorted((pytester.path / "reports").glob(f"*.{suffix}"))


def test_audit_suite_writes_a_self_contained_html_report_with_the_spend_chart(pytester, reg):
    result = pytester.runpytest(str(CHECKS), "--registry", str(reg), "-p", "no:cacheprovider")
    assert result.ret == 0
    (html,) = reports(pytester, "html")
    assert re.fullmatch(r"audit-\d{8}T\d{6}Z\.html", html.name)
    text = html.read_text()
    assert '<h1 id="title">gpuharness audit of ' in text
    assert "gpuharness audit: spend at a glance" in text
    assert "No leak found: every check passed." in text
    for table in ("Spend by month (UTC)", "Spend by provider", "Spend by GPU", "Spend by deployment"):
        assert table in text
    assert "dep_h3_01" in text and "RTX 5090" in text
    png = re.search(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", text)
    assert png is not None and base64.b64decode(png.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    assert 'href="assets/' not in text and "<link" not in text.split("<body")[0].replace('rel="icon"', "")


def test_audit_suite_writes_junit_xml_with_every_check(pytester, reg):
    result = pytester.runpytest(str(CHECKS), "--registry", str(reg), "-p", "no:cacheprovider")
    outcomes = result.parseoutcomes()
    (xml,) = reports(pytester, "xml")
    suite = ET.parse(xml).getroot().find("testsuite")
    assert suite is not None
    assert int(suite.get("tests", "0")) == outcomes["passed"] + outcomes.get("skipped", 0)
    names = {case.get("name") for case in suite.iter("testcase")}
    assert "test_spend_within_policy_ceiling[daily]" in names
    assert html_and_xml_share_a_stem(pytester)


def html_and_xml_share_a_stem(pytester: pytest.Pytester) -> bool:
    return [p.stem for p in reports(pytester, "html")] == [p.stem for p in reports(pytester, "xml")]


def test_failing_audit_report_says_what_leaks(pytester, reg):
    policy = json.loads((reg / "policy.json").read_text())
    policy["daily_usd"] = 2.0
    (reg / "policy.json").write_text(json.dumps(policy))
    pytester.runpytest(str(CHECKS), "--registry", str(reg), "-p", "no:cacheprovider")
    (html,) = reports(pytester, "html")
    text = unescape(html.read_text())
    assert "Audit found" in text and "spend:daily" in text
    assert re.search(r"Days over daily_usd: 2026-11-\d\d", text)


def test_user_html_and_junitxml_replace_the_automatic_reports(pytester, reg):
    mine = pytester.path / "mine"
    result = pytester.runpytest(str(CHECKS), "--registry", str(reg), "-p", "no:cacheprovider",
                                f"--html={mine / 'a.html'}", "--self-contained-html", f"--junitxml={mine / 'a.xml'}")
    assert result.ret == 0
    assert (mine / "a.html").is_file() and (mine / "a.xml").is_file()
    assert reports(pytester, "html") == [] and reports(pytester, "xml") == []


def test_any_suite_under_checks_gets_reports_named_after_it(pytester):
    suite = pytester.path / "checks" / "smoke"
    suite.mkdir(parents=True)
    (suite / "test_smoke.py").write_text("def test_up():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest(str(suite), "-p", "no:cacheprovider")
    assert result.ret == 0
    (html,) = reports(pytester, "html")
    assert html.name.startswith("smoke-")
    assert "spend at a glance" not in html.read_text()
    assert [p.name.startswith("smoke-") for p in reports(pytester, "xml")] == [True]


def test_runs_outside_checks_write_no_reports(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    pass\n")
    assert pytester.runpytest("-p", "no:cacheprovider").ret == 0
    assert not (pytester.path / "reports").exists()


@pytest.mark.parametrize(("args", "expected"), [
    (["checks/audit"], "audit"),
    (["checks/health/test_gpu.py::test_gpu_is_the_one_paid_for"], "health"),
    (["/opt/venv/lib/python3.11/site-packages/gpuharness/_checks/plan"], "plan"),
    (["checks/audit", "checks/health"], "audit+health"),
    (["checks"], "checks"),
    (["/srv/checks/gh/checks/plan"], "plan"),  # the innermost checks directory names the suite
    (["tests"], None),
])
def test_suite_name_comes_from_the_collected_path(tmp_path, args, expected):
    assert suite_name(args, tmp_path) == expected


def test_report_paths_never_overwrite_an_earlier_report(tmp_path):
    moment = datetime(2026, 11, 30, 20, 5, 7, tzinfo=UTC)
    html, xml = report_paths(tmp_path, "audit", moment)
    assert (html.name, xml.name) == ("audit-20261130T200507Z.html", "audit-20261130T200507Z.xml")
    html.write_text("earlier")
    again, _ = report_paths(tmp_path, "audit", moment)
    assert again.name == "audit-20261130T200507Z-2.html"


def test_under_xdist_the_audit_report_still_opens_with_the_spend_summary(pytester, reg):
    result = pytester.runpytest(str(CHECKS), "--registry", str(reg), "-p", "no:cacheprovider", "-n", "2")
    assert result.ret == 0
    (html,) = reports(pytester, "html")
    text = html.read_text()
    assert "gpuharness audit: spend at a glance" in text and "data:image/png;base64," in text


def test_audit_report_shows_billed_used_and_idle(pytester, reg):
    assert pytester.runpytest(str(CHECKS), "--registry", str(reg), "-p", "no:cacheprovider").ret == 0
    (html,) = reports(pytester, "html")
    text = unescape(html.read_text())
    assert re.search(r"total billed \$1,2\d\d\.\d\d \(idle \$1,1\d\d\.\d\d: uptime no job used\)", text)
    assert "<th>billed USD</th><th>used USD</th><th>idle USD</th>" in text
