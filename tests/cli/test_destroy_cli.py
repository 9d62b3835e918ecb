"""`gpuharness destroy` and `gpuharness reap --apply` refusal paths through the command line, against the
simulator: one-line errors, exit codes, and nothing terminated."""

from __future__ import annotations

import json

import pytest
from lifecycle_fakes import provision_comfyui

from gpuharness.core.clock import now_ts
from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import SimulatedEstate

DEP = "dep_cli_01"


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        provision_comfyui(lab, DEP)
        yield lab


def add_unsynced_job(lab):
    ledger = Ledger(lab.registry.ledger_path)
    base = {"id": "J-000001", "deployment_id": DEP, "provider": "vast", "started_at": now_ts()}
    ledger.append({**base, "status": "running"})
    ledger.append({**base, "status": "completed", "completed_at": now_ts(), "duration_s": 1.0, "cost_usd": 0.0001,
                   "artifacts": [{"name": "out.png", "remote_path": "workspace/output/missing.png",
                                  "synced_at": None}]})


def live_instances(lab):
    return [i for i in lab.sim.state.instances.values() if i.status != "terminated"]


def test_destroy_cli_without_confirm_is_a_one_line_error(lab):
    result = lab.cli("destroy", DEP, "--registry", str(lab.registry.root))
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and f"--confirm {DEP}" in result.stderr
    assert len(live_instances(lab)) == 1


def test_destroy_cli_refuses_unsynced_artifacts_then_discards_on_purpose(lab):
    add_unsynced_job(lab)
    refused = lab.cli("destroy", DEP, "--confirm", DEP, "--registry", str(lab.registry.root))
    assert refused.returncode == 2 and "artifacts not synced" in refused.stderr
    assert len(live_instances(lab)) == 1
    done = lab.cli("destroy", DEP, "--confirm", DEP, "--discard-artifacts", "--registry", str(lab.registry.root))
    assert done.returncode == 0, done.stderr
    assert "discarded on purpose: J-000001/out.png" in done.stdout
    assert live_instances(lab) == []
    assert lab.registry.deployment(DEP).status == "destroyed"


def test_reap_apply_cli_refuses_to_destroy_when_artifacts_cannot_be_synced(lab):
    add_unsynced_job(lab)
    with lab.registry.update("deployments.json") as doc:
        doc["deployments"][0]["shutdown_rule"] = {"deadline": "2026-01-01T00:00:00Z"}
    dry = lab.cli("reap", "--registry", str(lab.registry.root))
    assert dry.returncode == 0 and "destroy (dry run: pass --apply)" in dry.stdout
    applied = lab.cli("reap", "--apply", "--registry", str(lab.registry.root), "--to", str(lab.root / "o"),
                      "--json")
    assert applied.returncode == 1
    [decision] = json.loads(applied.stdout)
    assert decision["action"] == "refused" and "could not be synced" in decision["reasons"][-1]
    assert len(live_instances(lab)) == 1
    assert lab.registry.deployment(DEP).status == "provisioning"
