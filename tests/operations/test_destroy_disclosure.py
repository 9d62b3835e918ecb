"""Disclosure before destroy, as before a launch: the exact target, provider and instance, what is lost with it
(unsynced artifacts), and the burn it stops, said before any provider call (real process, the simulator)."""

from __future__ import annotations

import json

import pytest
from lifecycle_fakes import provision_comfyui

from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import SimulatedEstate

DEP = "dep_bye_01"


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        provision_comfyui(lab, DEP, cost_hr=0.4)
        Ledger(lab.registry.ledger_path).append({
            "id": "J-000001", "deployment_id": DEP, "provider": "vast", "status": "completed",
            "started_at": "2026-11-30T20:00:00Z", "completed_at": "2026-11-30T20:01:00Z", "duration_s": 60.0,
            "cost_usd": 0.0067, "ts": "2026-11-30T20:01:00Z",
            "artifacts": [{"name": "out.png", "remote_path": "gh-workspace/outputs/J-000001/out.png"}]})
        yield lab


def test_destroy_discloses_target_instance_loss_and_burn_before_any_provider_call(lab):
    instance = lab.registry.deployment(DEP).instance_id
    burn = f"burn stopped:    ${lab.registry.deployment(DEP).cost_hr:.3f}/hr"
    lab.sim.inject(provider="vast", fault="server_error", count=-1)  # every provider call fails: nothing happens
    failed = lab.cli("destroy", DEP, "--confirm", DEP, "--discard-artifacts", "--registry", str(lab.registry.root))
    assert failed.returncode == 2
    lines = failed.stderr.splitlines()
    assert f"target:          {DEP} (provisioning, owner " in failed.stderr
    assert "provider:        vast" in lines and f"instance:        {instance}" in lines
    assert ("lost:            1 unsynced artifact(s), discarded on purpose: J-000001/out.png; whatever else is on "
            "the instance's disk") in lines
    assert burn in lines
    assert lines.index(burn) < len(lines) - 1  # said first, then the failure
    lab.sim.faults.clear()
    done = lab.cli("destroy", DEP, "--confirm", DEP, "--discard-artifacts", "--json",
                   "--registry", str(lab.registry.root))
    assert done.returncode == 0, done.stderr
    assert burn in json.loads(done.stdout)["disclosure"]


def test_destroy_says_when_nothing_unsynced_is_lost(lab):
    Ledger(lab.registry.ledger_path).append({
        "id": "J-000001", "deployment_id": DEP, "provider": "vast", "status": "completed", "correction": True,
        "reason": "artifacts synced", "started_at": "2026-11-30T20:00:00Z", "completed_at": "2026-11-30T20:01:00Z",
        "duration_s": 60.0, "cost_usd": 0.0067, "ts": "2026-11-30T20:02:00Z",
        "artifacts": [{"name": "out.png", "remote_path": "gh-workspace/outputs/J-000001/out.png",
                       "synced_at": "2026-11-30T20:02:00Z", "uri": "file:///tmp/out.png"}]})
    done = lab.cli("destroy", DEP, "--confirm", DEP, "--registry", str(lab.registry.root))
    assert done.returncode == 0, done.stderr
    assert "lost:            no unsynced artifact" in done.stderr
