"""`gpuharness demo`: the main job on a fresh machine. One run, many facts."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("demo")
    completed = subprocess.run([sys.executable, "-m", "gpuharness", "demo", "--workdir", str(workdir), "--json"],
                               capture_output=True, text=True, timeout=300)
    return workdir, completed


def test_demo_exits_zero_with_a_summary(demo):
    workdir, completed = demo
    assert completed.returncode == 0, completed.stdout + completed.stderr
    summary = json.loads(completed.stdout)
    assert summary["ok"] and summary["problems"] == []
    assert summary["suites"] == {"health": 1, "audit": 0, "plan": 0}  # health: the OOM deployment fails, as staged
    for name in ("health", "audit", "plan"):
        assert (workdir / "reports" / f"{name}.html").stat().st_size > 1000


def test_demo_shows_a_pod_stopping_itself_and_its_bill_ending_there(demo):
    workdir, completed = demo
    summary = json.loads(completed.stdout)
    [step] = [s for s in summary["steps"] if s.startswith("dep_h3_vast_idle stopped itself")]
    assert "while no gpuharness process was connected" in step and "stopped by its guard: idle 1 min" in step
    assert "the interval ends where its guard stopped it" in step
    logs = [p.read_text() for p in (workdir / "hosts").glob("*/gh-workspace/.gh-guard/guard.log")]
    assert [log for log in logs if "GH-GUARD stop at=" in log and "why=idle 1 min" in log], logs


def test_demo_oom_deployment_is_never_ready_and_its_cause_is_shown(demo):
    workdir, completed = demo
    summary = json.loads(completed.stdout)
    assert "cause cuda_oom" in summary["oom"] and "--lowvram" in summary["oom"]
    registry = Registry(workdir / ".pi" / "gpu")
    bad = registry.deployment("dep_h3_runpod_01")
    assert bad.ready_at is None and bad.health["status"] == "failed"
    assert bad.status == "destroyed"


def test_demo_power_capped_deployment_fails_its_performance_check_with_its_cause(demo):
    workdir, completed = demo
    summary = json.loads(completed.stdout)
    assert "failed check: gpu_performs_like_its_class; cause power_cap" in summary["capped"]
    assert "the enforced power limit is 180 W of its default 450 W" in summary["capped"]
    capped = Registry(workdir / ".pi" / "gpu").deployment("dep_h3_vast_02")
    assert capped.ready_at is None and capped.health["performance"]["cause"] == "power_cap"
    assert any(step.startswith("gpus --history (RTX 4090 at vast): dep_h3_vast_02 stands out: matmul TFLOP/s 60.8")
               for step in summary["steps"])


def test_demo_summary_names_the_pair_of_the_pod_whose_nvlink_is_down(demo):
    _, completed = demo
    summary = json.loads(completed.stdout)
    assert summary["pod"].startswith("cause nvlink_down: GPU 0 -> GPU 3 peer copy (NVLink) 49.9 GB/s is 0.13 of its "
                                     "class's 376 GB/s (floor 0.85); likely cause: nvlink down (GPU 3 has 0 of 18 "
                                     "NVLinks active")


def test_demo_leaves_real_ledger_lines_artifacts_and_history(demo):
    workdir, _ = demo
    registry = Registry(workdir / ".pi" / "gpu")
    current = Ledger(registry.ledger_path).current()
    assert len(current) == 3
    for job in current.values():
        assert job["status"] == "completed" and job["correction"] and job["reason"] == "artifacts synced"
        [artifact] = job["artifacts"]
        assert artifact["synced_at"] and (workdir / "outputs" / job["id"] / artifact["name"]).exists()
    assert {d.status for d in registry.deployments()} == {"destroyed"}


def test_demo_leaves_no_process_running(demo):
    workdir, _ = demo
    found = subprocess.run(["pgrep", "-f", str(workdir)], capture_output=True, text=True)
    assert found.stdout.strip() == ""


def test_demo_refuses_a_used_workspace(demo):
    workdir, _ = demo
    again = subprocess.run([sys.executable, "-m", "gpuharness", "demo", "--workdir", str(workdir)],
                           capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "fresh workspace" in again.stderr


def test_demo_prints_a_plain_step_header_per_phase_as_it_goes(demo):
    """Not a terminal (a pipe): every phase's header is a plain line on stderr, with its suite's own steps as
    progress and its time, so the demo is never silent while a suite runs; stdout keeps the JSON summary."""
    _, completed = demo
    lines = completed.stderr.splitlines()
    headers = [line for line in lines if line.startswith("demo step ")]
    assert [h.split(":")[0] for h in headers] == [f"demo step {n}/7" for n in range(1, 8)], headers
    assert "\x1b[" not in completed.stderr, "plain lines: no terminal escapes"
    health = lines.index(next(h for h in headers if "health suite" in h))
    progress = lines[health + 1:lines.index(headers[2])]
    assert [p for p in progress if ": health: probing " in p] == [
        f"  {n}/5: health: probing {d} for its 16 checks" for n, d in
        enumerate(("dep_h3_vast_01", "dep_h3_runpod_01", "dep_h3_vast_02"), 2)]
    assert progress[-1].startswith("  done in ")
    assert json.loads(completed.stdout)["ok"]
