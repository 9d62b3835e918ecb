"""Ceilings that hold together (issue 18, item 4): a job's expected cost is reserved under the registry lock before
it starts, so two `gpuharness run`s started at once cannot together pass daily_usd."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from gpuharness.core import claims
from gpuharness.core.clock import format_ts
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import transition
from gpuharness.core.policy import Policy
from gpuharness.core.reservations import RESERVATIONS, Expected, expected_cost, reserved
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.sim.simulated_runtime import RuntimeFaults

DEPLOYMENTS = ("dep_res_a", "dep_res_b")


def ready(lab: SimulatedEstate, deployment_id: str) -> None:
    provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.35,
                                        runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=15,
                                        deployment_id=deployment_id), up_deadline_s=30, poll_s=0.1)
    install(lab.ctx, deployment_id, deadline_s=60)
    configure(lab.ctx, deployment_id, deadline_s=60)
    transition(lab.registry, deployment_id, "ready", ready_at=lab.registry.deployment(deployment_id).created_at,
               health={"status": "passed"})


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    with SimulatedEstate(tmp_path_factory.mktemp("reserve") / "lab", say=lambda line: None) as lab:
        for deployment_id in DEPLOYMENTS:
            ready(lab, deployment_id)
        with lab.registry.update("workflows.json") as document:
            document["workflows"][0]["estimated_cost_usd"] = 0.6
        with lab.registry.update("policy.json") as document:
            document.update(per_job_usd=5.0, daily_usd=1.0, monthly_usd=500.0)
        yield lab


def hold_jobs(lab: SimulatedEstate, hold: bool) -> None:
    """Jobs on both hosts never finish while held (the simulated ComfyUI reads its faults on every poll)."""
    for deployment_id in DEPLOYMENTS:
        host = lab.host_of(deployment_id)
        host.reconfigure(replace(host.spec, runtime_faults=RuntimeFaults(never_finishes=hold)))


def start_run(lab: SimulatedEstate, deployment_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gpuharness", "run", deployment_id, "--inputs",
                             '{"text": "a cat"}', "--poll", "0.05", "--registry", str(lab.registry.root)],
                            env=lab.env, cwd=lab.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def first_to_exit(processes: list[subprocess.Popen[str]], timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for index, process in enumerate(processes):
            if process.poll() is not None:
                return index
        time.sleep(0.05)
    for process in processes:
        process.kill()
    raise AssertionError("neither run ended: both are running jobs together past daily_usd")


def test_held_out_two_concurrent_runs_cannot_together_pass_daily_usd(lab):
    hold_jobs(lab, True)
    processes = [start_run(lab, deployment_id) for deployment_id in DEPLOYMENTS]
    try:
        refused_index = first_to_exit(processes, timeout_s=45)
    finally:
        hold_jobs(lab, False)
    ran_index = 1 - refused_index
    out, err = processes[ran_index].communicate(timeout=60)
    refused_out, refused_err = processes[refused_index].communicate(timeout=10)
    assert processes[refused_index].returncode == 2, refused_out + refused_err
    errors = [line for line in refused_err.splitlines() if line.startswith("gpuharness: error")]
    assert len(errors) == 1 and "daily_usd" in errors[0] and "reserved" in errors[0], refused_err
    assert processes[ran_index].returncode == 0, out + err
    lines = list(Ledger(lab.registry.ledger_path).records())
    assert {line["deployment_id"] for line in lines} == {DEPLOYMENTS[ran_index]}  # the refused one submitted nothing
    assert lab.registry.deployment(DEPLOYMENTS[refused_index]).status == "ready"
    assert json.loads(lab.registry.path(RESERVATIONS).read_text())["reservations"] == []  # settled by its lines


def test_a_reservation_is_void_once_its_run_is_gone_or_past_its_timeout(lab):
    root = lab.registry.root
    policy = Policy(lab.registry.spending_policy())
    now = datetime.now(UTC)

    def reservation(deployment_id: str, expires: timedelta) -> dict[str, object]:
        return {"id": f"r-{deployment_id}-{expires}", "deployment_id": deployment_id, "amount_usd": 0.9,
                "created_at": format_ts(now - timedelta(hours=2)), "expires_at": format_ts(now + expires)}

    dead = reservation(DEPLOYMENTS[0], timedelta(hours=1))  # no process holds dep_res_a's run claim
    late = reservation(DEPLOYMENTS[1], -timedelta(seconds=1))  # its run is alive, but past its timeout
    lab.registry.path(RESERVATIONS).write_text(json.dumps({"schema_version": 1, "reservations": [dead, late]}))
    with claims.claimed(root, "run", DEPLOYMENTS[1], busy="busy", hint=""):
        with reserved(root, policy, lambda: (0.0, 0.0), deployment_id=DEPLOYMENTS[1], workflow=WORKFLOW,
                      expected=Expected(0.6, "test", 60.0), clock=lambda: now) as item:
            held = json.loads(lab.registry.path(RESERVATIONS).read_text())["reservations"]
            assert [r["id"] for r in held] == [item["id"]]
            with pytest.raises(UserError, match="daily_usd") as info:  # a second one does not fit beside it
                with reserved(root, policy, lambda: (0.0, 0.0), deployment_id=DEPLOYMENTS[1], workflow=WORKFLOW,
                              expected=Expected(0.6, "test", 60.0), clock=lambda: now):
                    pass
            assert "$0.60 reserved by 1 job(s) running now" in info.value.line()
    assert json.loads(lab.registry.path(RESERVATIONS).read_text())["reservations"] == []


def test_expected_cost_is_the_declared_estimate_or_deadline_times_rate_capped_at_per_job():
    assert expected_cost({"id": "w", "estimated_cost_usd": 0.25}, 2.0, 600, 2, 5.0).amount_usd == 0.25
    by_rate = expected_cost({"id": "w"}, 0.36, 600, 2, 5.0)
    assert by_rate.amount_usd == pytest.approx(0.12) and by_rate.timeout_s == 1200
    assert expected_cost({"id": "w"}, 36.0, 600, 2, 5.0).amount_usd == 5.0


def test_a_declared_estimate_above_per_job_usd_is_refused_before_the_job(lab):
    with lab.registry.update("workflows.json") as document:
        document["workflows"][0]["estimated_cost_usd"] = 7.5
    try:
        result = lab.cli("run", DEPLOYMENTS[0], "--inputs", '{"text": "a cat"}', "--registry", str(lab.registry.root))
    finally:
        with lab.registry.update("workflows.json") as document:
            document["workflows"][0]["estimated_cost_usd"] = 0.6
    assert result.returncode == 2 and "per_job_usd" in result.stderr, result.stderr
    assert lab.registry.deployment(DEPLOYMENTS[0]).status == "ready"
