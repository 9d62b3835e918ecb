"""`gpuharness reap` through the command line against the simulator and a simulated host over real SSH."""

from __future__ import annotations

import json
import os
from datetime import timedelta

import pytest
from lifecycle_fakes import provision_comfyui

from gpuharness.core.clock import format_ts, parse_ts, utcnow
from gpuharness.core.jsonl import append_record
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.reap import OBSERVATIONS, activity

DEP = "dep_reap_01"


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        provision_comfyui(lab, DEP, idle_minutes=0.001)
        # two earlier idle observations with the current progress marker (written as a person could)
        deployment = lab.registry.deployment(DEP)
        last, marker = activity(lab.ctx, deployment)
        for minutes in (10, 5):
            append_record(lab.registry.root / OBSERVATIONS, {
                "deployment": DEP, "observed_at": format_ts(utcnow() - timedelta(minutes=minutes)),
                "status": deployment.status, "running_jobs": [], "last_activity": last, "marker": marker})
        yield lab


def reap_apply(lab):
    result = lab.cli("reap", "--apply", "--json", "--registry", str(lab.registry.root), "--to", str(lab.root / "o"))
    assert result.returncode in (0, 1), result.stderr
    [decision] = json.loads(result.stdout)
    return decision


def test_reap_apply_destroys_an_idle_deployment_after_checking_the_host(lab):
    execs = lab.host_of(DEP).stats["ssh_execs"]
    decision = reap_apply(lab)
    assert decision["action"] == "destroyed", decision
    assert lab.host_of(DEP).stats["ssh_execs"] == execs + 1  # the one output-progress look
    assert lab.registry.deployment(DEP).status == "destroyed"


def test_reap_apply_keeps_it_when_the_host_shows_new_output(lab):
    frame = lab.host_of(DEP).workspace / "output" / "frame_0001.png"
    frame.write_bytes(b"png")
    last, _ = activity(lab.ctx, lab.registry.deployment(DEP))
    stamp = parse_ts(last).timestamp() + 5  # written after the last activity the registry knows of
    os.utime(frame, (stamp, stamp))
    decision = reap_apply(lab)
    assert decision["action"] == "keep" and "frame_0001.png" in decision["reasons"][-1]
    assert lab.registry.deployment(DEP).status == "provisioning"
