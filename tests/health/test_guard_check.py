"""test_shutdown_guard_armed on simulated hosts: it passes while the guard configure left runs, and fails, with
what to do, for a billed deployment with a shutdown rule whose guard was killed or never started."""

from __future__ import annotations

from health_world import run_checks

CHECK = "test_shutdown_guard_armed"


def failed_line(result, dep):
    lines = [line for line in result.outlines if line.startswith(f"FAILED test_health.py::{CHECK}[{dep}]")]
    assert lines, f"{CHECK}[{dep}] did not fail:\n" + "\n".join(result.outlines[-30:])
    return lines[0]


def test_a_killed_guard_fails_the_check_and_keeps_the_deployment_from_ready(pytester, world):
    world.add("dep_killed")
    world.hosts["dep_killed"].arm_fault("guard_killed")
    line = failed_line(run_checks(pytester, world), "dep_killed")
    assert "bills $0.4/h with the shutdown rule 'idle 30 min' but no guard runs on the host" in line, line
    assert "dead" in line and "gpuharness guard dep_killed" in line, line
    deployment = world.deployment("dep_killed")
    assert deployment["status"] == "health-checking" and deployment["health"]["status"] == "failed"
    assert "shutdown_guard_armed" in deployment["health"]["failed_checks"]


def test_a_guard_never_started_fails_naming_what_the_probe_saw(pytester, world):
    world.add("dep_unguarded", guard=False)
    line = failed_line(run_checks(pytester, world), "dep_unguarded")
    assert "rule none, no pid, no heartbeat" in line, line


def test_no_shutdown_rule_or_nothing_billed_needs_no_guard(pytester, world):
    world.add("dep_free", guard=False, cost_hr=0.0)
    world.add("dep_norule", guard=False, shutdown_rule=None)
    result = run_checks(pytester, world)
    assert not [line for line in result.outlines if line.startswith(f"FAILED test_health.py::{CHECK}")], \
        "\n".join(result.outlines[-30:])
    assert world.deployment("dep_free")["status"] == world.deployment("dep_norule")["status"] == "ready"
