"""A check suite says what it is doing as it does it (a step header per phase, plain lines where stdout is not a
terminal), and health.html shows, for every check, passing or failing, the facts it judged."""

import html
import json
import os
import re

import pytest
from checkout import ROOT

from gpuharness.pytest_plugin.health_target import FACTS_SECTION
from gpuharness.pytest_plugin.steps import PREFIX
from gpuharness.pytest_plugin.suites import may_collect_health

FIXTURE = ROOT / "fixtures" / "health"
HEALTH = ROOT / "checks" / "health"
AUDIT = ROOT / "checks" / "audit"
DEPLOYMENTS = ("dep_comfy_ok", "dep_comfy_oom", "dep_comfy_full_disk", "dep_comfy_pcie")


def _health(pytester, *args):
    return pytester.runpytest_subprocess(str(HEALTH), "--registry", str(FIXTURE / ".pi" / "gpu"), "--cassettes",
                                         str(FIXTURE / "cassettes"), "-p", "no:cacheprovider", "-q", *args)


@pytest.mark.parametrize("workers", ["0", "2"])
def test_the_health_suite_prints_a_plain_step_header_per_phase(pytester, workers):
    result = _health(pytester, "-p", "no:html", "-n", workers)
    steps = [line for line in result.outlines if line.startswith(PREFIX)]
    assert steps[0].startswith(f"{PREFIX} 1/6: health: collected 64 check(s) of 4 deployment(s)"), steps
    probing = [re.sub(r"probing \w+", "probing D", s) for s in steps[1:5]]
    assert probing == [f"{PREFIX} {n}/6: health: probing D for its 16 checks" for n in range(2, 6)], steps
    assert sorted(s.split("probing ")[1].split()[0] for s in steps[1:5]) == sorted(DEPLOYMENTS)
    assert steps[5] == f"{PREFIX} 6/6: health: the ready gate's verdict"
    assert not any("\x1b[" in line for line in steps), "not a terminal: plain lines, no escapes"
    gate = result.outlines.index(steps[5])
    assert any("gpuharness ready gate" in line for line in result.outlines[gate:]), "the header precedes the verdict"


def test_the_audit_suite_prints_its_steps(pytester):
    result = pytester.runpytest_subprocess(str(AUDIT), "--registry", str(ROOT / "fixtures" / "demo" / ".pi" / "gpu"),
                                           "-p", "no:cacheprovider", "-p", "no:html", "-q")
    steps = [line for line in result.outlines if line.startswith(PREFIX)]
    assert [re.sub(r"\d+ check", "N check", s) for s in steps] == [
        f"{PREFIX} 1/3: audit: collected N check(s) (offline)", f"{PREFIX} 2/3: audit: running N check(s)",
        f"{PREFIX} 3/3: audit: the verdict"]


def test_no_step_header_outside_a_check_suite(pytester):
    pytester.makepyfile("def test_one():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    assert result.ret == 0
    assert not [line for line in result.outlines if line.startswith(PREFIX)]


def _logs(report: str) -> dict[str, str]:
    """Each test's log in pytest-html's data (its JSON blob)."""
    blob = re.search(r'data-jsonblob="([^"]*)"', report)
    assert blob, "no pytest-html data in the report"
    tests = json.loads(html.unescape(blob.group(1)))["tests"]
    return {test_id: "\n".join(run["log"] for run in runs) for test_id, runs in tests.items()}


def test_health_html_shows_the_facts_each_check_judged_passing_or_failing(pytester, tmp_path):
    report = tmp_path / "health.html"
    result = _health(pytester, f"--html={report}", "--self-contained-html")
    result.assert_outcomes(passed=52, failed=4, skipped=8)
    logs = _logs(report.read_text("utf-8"))
    judged = {test_id: log for test_id, log in logs.items() if "[dep_comfy_" in test_id}
    assert len(judged) == 64  # 16 checks of 4 deployments
    blind = sorted(test_id for test_id, log in judged.items() if FACTS_SECTION not in log)
    assert blind == [], f"checks whose report shows no facts: {blind}"
    assert "No log output captured" not in "".join(judged.values())
    ok = next(log for test_id, log in judged.items() if "test_disk_has_room_for_model[dep_comfy_ok]" in test_id)
    assert re.search(r"dep_comfy_ok: [\d.]+ GiB free on /workspace \(need [\d.]+ GiB\)", ok), ok
    full = next(log for test_id, log in judged.items() if "test_disk_has_room_for_model[dep_comfy_full_disk]" in
                test_id)
    assert "dep_comfy_full_disk: 0.2 GiB free on /workspace, need 16.5 GiB" in full.split(FACTS_SECTION, 1)[1]
    reached = next(log for test_id, log in judged.items() if "test_host_reachable[dep_comfy_ok]" in test_id)
    assert "the probe ran to its end" in reached


@pytest.mark.parametrize(("args", "expected"), [
    ([], True),
    (["checks/audit"], False),
    (["checks/plan/test_plan.py::test_x", "checks/audit"], False),
    (["checks/audit", "checks/health"], True),
    (["checks"], True),
    (["tests/test_mine.py"], True),
    (["/srv/checks/gpuharness/checks/health"], True),  # a clone under a directory named checks
    (["/srv/checks/gpuharness/checks/audit"], False),
    (["/home/me/checks/mine/test_x.py"], True),
])
def test_only_a_run_that_may_collect_health_checks_loads_their_family(tmp_path, args, expected):
    assert may_collect_health(args, tmp_path) is expected


def test_an_audit_run_spares_the_health_imports_and_a_health_run_loads_them(pytester, monkeypatch):
    """The audit alone leaves the health family (its probe and runtime imports) unloaded; health still has it."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(pytester.path), os.environ.get("PYTHONPATH")])))
    pytester.makepyfile(family_spy=
        "import sys\n"
        "def pytest_sessionfinish(session):\n"
        "    loaded = 'gpuharness.pytest_plugin.health' in sys.modules\n"
        "    print('HEALTH-FAMILY', 'loaded' if loaded else 'absent')\n")
    registry = ROOT / "fixtures" / "demo" / ".pi" / "gpu"
    audit = pytester.runpytest_subprocess(str(AUDIT), "--registry", str(registry), "-p", "no:html", "-s", "--co",
                                         "-p", "family_spy")
    assert "HEALTH-FAMILY absent" in audit.stdout.str()
    health = pytester.runpytest_subprocess(str(HEALTH), "--registry", str(registry), "-p", "no:html", "-s", "--co",
                                          "-p", "family_spy")
    assert "HEALTH-FAMILY loaded" in health.stdout.str()
