"""The shutdown guard on the simulator: configure leaves it running on the pod, and with no gpuharness process
connected it stops the pod through the provider's in-pod route when its rule says so."""

from __future__ import annotations

import subprocess
import time
from datetime import UTC, datetime

import pytest

from gpuharness.core.billing import billed_intervals
from gpuharness.core.clock import parse_ts
from gpuharness.core.deployment import Deployment
from gpuharness.core.journal import read_entries, read_journal
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.guard import guard_plan
from gpuharness.operations.guard_stop import GUARD_STOP
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision

BOUND_S = 240.0  # the bound: the provider shows the pod stopped within 4 minutes


@pytest.fixture
def lab(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_GUARD_MINUTE_S", "1")  # a guard minute lasts one second here
    said: list[str] = []
    with SimulatedEstate(tmp_path / "lab", sleep=lambda s: None, say=said.append) as lab:
        lab.said = said
        yield lab


def launched(lab, dep_id, provider="vast", **rule):
    gpu = "RTX 4090" if provider == "vast" else "NVIDIA GeForce RTX 4090"
    provision(lab.ctx, ProvisionRequest(provider=provider, gpu=gpu, image="comfyui:1", cost_hr=0.8,
                                        runtime="comfyui", model=MODEL, workflow=WORKFLOW, deployment_id=dep_id,
                                        **rule), up_deadline_s=30, poll_s=0.1)
    install(lab.ctx, dep_id, deadline_s=60)
    configure(lab.ctx, dep_id, deadline_s=60, guard_poll_s=0.2)
    return lab.registry.deployment(dep_id)


def provider_status(lab, dep):
    instance = lab.sim.state.instances[(dep.provider, str(dep.instance_id))]
    return instance.status


def wait_stopped(lab, dep):
    start = time.monotonic()
    while time.monotonic() - start < BOUND_S:
        if provider_status(lab, dep) == "stopped":
            return time.monotonic() - start
        time.sleep(0.2)
    raise AssertionError(f"{dep.id} still {provider_status(lab, dep)} after {BOUND_S:g} s")


@pytest.mark.parametrize("provider", ["vast", "runpod"])
def test_an_idle_pod_stops_itself_through_its_in_pod_route(lab, provider):
    dep = launched(lab, f"dep_guard_{provider}", provider=provider, idle_minutes=1)
    assert any("GH-GUARD" in line or "armed" in line for line in lab.said), lab.said
    wait_stopped(lab, dep)
    log = (lab.host_of(dep.id).workspace / ".gh-guard" / "guard.log").read_text()
    assert "why=idle 1 min" in log or "why=idle" in log, log


def test_the_by_hand_flow_with_idle_minutes_1_stops_the_pod_and_status_refresh_says_why(lab):
    dep_id = "dep_idle_01"
    # provisioned in process (the estate tells it the simulated host's route), then the README's commands
    provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfy:1", cost_hr=0.4,
                                        runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=1,
                                        deployment_id=dep_id),
              up_deadline_s=30, poll_s=0.1)
    for args in (("install", dep_id), ("configure", dep_id, "--guard-poll-s", "0.2")):
        done = lab.cli(*args)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "GH-GUARD armed" in done.stdout + done.stderr or "armed" in done.stderr, done.stdout + done.stderr
    dep = lab.registry.deployment(dep_id)
    wait_stopped(lab, dep)  # no gpuharness process runs from here on: the pod stopped itself
    refreshed = lab.cli("status", "--refresh")
    assert f"{dep_id} -> stopped: stopped by its guard: idle 1 min" in refreshed.stdout, refreshed.stdout
    assert lab.registry.deployment(dep_id).status == "stopped"
    shown = lab.cli("status")
    assert "stopped by its guard: idle 1 min" in shown.stdout, shown.stdout
    # the journal holds the guard's stop as the verified stop, at the moment the guard made it
    [stop] = [e for e in read_journal(lab.registry.journal_path) if e["deployment"] == dep_id
              and isinstance(e.get("marker"), dict) and e["marker"].get("event") == GUARD_STOP]
    assert stop["to"] == "stopped" and stop["note"] == "stopped by its guard: idle 1 min"
    [*_, last] = [i for i in billed_intervals([lab.registry.deployment(dep_id)],
                                              read_entries(lab.registry.journal_path), now=datetime.now(UTC))[dep_id]
                  if i.kind == "instance"]
    assert last.end == parse_ts(stop["marker"]["stopped_at"]) < parse_ts(stop["ts"])


def test_max_hours_stops_the_pod_even_while_it_is_not_idle_long(lab):
    dep = launched(lab, "dep_maxh_01", max_hours=0.05)  # 3 guard minutes: 3 s here
    wait_stopped(lab, dep)
    refreshed = lab.cli("status", "--refresh")
    assert "dep_maxh_01 -> stopped: stopped by its guard: max_hours 0.05 h" in refreshed.stdout, refreshed.stdout


def sandbox_configure(tmp_path, plan, env):
    from gpuharness.operations.install import configure_script

    script = configure_script("ws", None, plan, "idle 1 min")
    done = subprocess.run(["/bin/sh", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=30,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env})
    return done.stdout


def test_a_pod_without_its_provider_identity_gets_no_guard_and_configure_says_why(tmp_path):
    record = Deployment.from_json({"id": "dep_x", "provider": "vast", "status": "configuring", "cost_hr": 0.4,
                                   "created_at": "2026-12-05T08:00:00Z", "shutdown_rule": {"idle_minutes": 5}})
    plan = guard_plan(record, {"kind": "vast"})
    out = sandbox_configure(tmp_path, plan, {})  # no CONTAINER_ID, no CONTAINER_API_KEY: nothing placed
    assert "GH-GUARD refused: the pod holds no CONTAINER_ID" in out and "operator key never goes there" in out
    assert not (tmp_path / "ws" / ".gh-guard" / "pid").exists()
    assert "GH-DONE configure" in out


def test_a_provider_without_an_in_pod_stop_gets_the_configured_action_or_a_warning():
    record = Deployment.from_json({"id": "dep_m", "provider": "massed", "status": "configuring", "cost_hr": 0.6,
                                   "created_at": "2026-12-05T08:00:00Z", "shutdown_rule": {"max_hours": 2}})
    plan = guard_plan(record, {"kind": "massed"})
    assert plan is not None and plan.action is None
    assert "massed places no in-pod stop" in (plan.warning or "") and "reap --apply" in (plan.warning or "")
    shutdown = guard_plan(record, {"kind": "massed", "guard_action": "shutdown"})
    assert shutdown is not None and shutdown.action == "shutdown" and shutdown.warning is None
    assert guard_plan(Deployment.from_json({**record.to_json(), "shutdown_rule": None}), {"kind": "vast"}) is None


def test_the_rule_reaches_the_pod_only_as_quoted_values():
    record = Deployment.from_json({"id": "dep_q", "provider": "runpod", "status": "configuring", "cost_hr": 0.4,
                                   "created_at": "2026-12-05T08:00:00Z", "runtime": "comfyui", "service_port": 8188,
                                   "shutdown_rule": {"idle_minutes": 5, "deadline": "2026-12-06T00:00:00Z"}})
    text = guard_plan(record, {"kind": "runpod"}).rule_text()
    assert "action=api\n" in text and "path=/pods/%s/stop\n" in text and "deadline=2026-12-06T00:00:00Z\n" in text
    assert "api_default=https://rest.runpod.io/v1\n" in text and "launch=1796457600\n" in text
    assert "deadline_end=1796515200\n" in text
