"""The whole lifecycle over real loopback HTTP (provider simulator, ComfyUI runtime) and real SSH/SFTP
(simulated hosts), with the registry, the ledger and the journal asserted at each step."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import read_journal
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.destroy import destroy
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.run import run_job

DEP = "dep_e2e_01"


def journal_tos(lab, dep_id=DEP):
    return [(e["from"], e["to"]) for e in read_journal(lab.registry.journal_path) if e["deployment"] == dep_id]


def ledger_bytes(lab):
    path = lab.registry.ledger_path
    return path.read_bytes() if path.exists() else b""


@pytest.fixture
def lab(tmp_path):
    slept: list[float] = []
    with SimulatedEstate(tmp_path / "lab", sleep=slept.append, say=lambda line: None) as lab:
        lab.slept = slept
        yield lab


def test_full_lifecycle_over_loopback_http_and_ssh(lab, tmp_path):
    ctx, registry = lab.ctx, lab.registry

    # provision: one launch, recorded before and after, SSH route known
    provision(ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.4,
                                    runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=15,
                                    deployment_id=DEP), up_deadline_s=30, poll_s=0.1)
    dep = registry.deployment(DEP)
    assert dep.status == "provisioning" and dep.instance_id and dep.ssh.port > 0
    assert lab.sim.stats()["launches"] == 1
    [machine] = registry.items("machines.json")
    assert machine["instance_id"] == dep.instance_id and machine["status"] == "running"
    assert journal_tos(lab)[0] == (None, "provisioning")

    # install + configure: one SSH exec each, model verified on the host
    host = lab.host_of(DEP)
    execs = host.stats["ssh_execs"]
    install(ctx, DEP, deadline_s=60)
    configure(ctx, DEP, deadline_s=60)
    assert host.stats["ssh_execs"] - execs == 2
    weights = host.workspace / "models" / "checkpoints" / "h3-mini.safetensors"  # where ComfyUI lists it
    expected = registry.items("models.json")[0]["files"][0]["sha256"]
    assert hashlib.sha256(weights.read_bytes()).hexdigest() == expected
    assert registry.deployment(DEP).status == "health-checking"
    assert journal_tos(lab)[-3:] == [("provisioning", "installing"), ("installing", "configuring"),
                                     ("configuring", "health-checking")]

    # the health suite is the only path to ready
    assert lab.suite("health", ["--gpu-mode", "live", "--deployment", DEP]) == 0, \
        (lab.root / "health.log").read_text()
    dep = registry.deployment(DEP)
    assert dep.status == "ready" and dep.ready_at and dep.health["status"] == "passed"
    assert journal_tos(lab)[-1] == ("health-checking", "ready")

    # run: running then completed lines, billed, artifacts left on the host
    for prompt in ("a cat", "a dog"):
        result = run_job(ctx, DEP, inputs={"text": prompt}, poll_s=0.05)
        assert result.status == "completed" and result.artifacts
    lines = list(Ledger(registry.ledger_path).records())
    assert [(r["id"], r["status"]) for r in lines] == [("J-000001", "running"), ("J-000001", "completed"),
                                                      ("J-000002", "running"), ("J-000002", "completed")]
    assert all(r["cost_usd"] >= 0 and r["duration_s"] >= 0 for r in lines if r["status"] == "completed")
    assert lines[1]["inputs"] == {"text": "a cat"} and lines[1]["artifacts"][0]["synced_at"] is None
    assert registry.deployment(DEP).status == "ready"

    # retrieve: SFTP, checksummed, correction lines appended (nothing rewritten)
    before = ledger_bytes(lab)
    synced = retrieve(ctx, DEP, tmp_path / "outputs")
    assert ledger_bytes(lab).startswith(before)
    assert len(synced.synced) == 2
    for artifact in synced.synced:
        local = Path(artifact["uri"].removeprefix("file://"))
        assert hashlib.sha256(local.read_bytes()).hexdigest() == artifact["sha256"]
    current = Ledger(registry.ledger_path).current()
    assert all(j["correction"] and j["artifacts"][0]["synced_at"] for j in current.values())

    # destroy: confirmed, terminated, verified, kept as history
    destroy(ctx, DEP, confirm=DEP)
    dep = registry.deployment(DEP)
    assert dep.status == "destroyed" and dep.destroyed_at
    assert [i.status for i in lab.sim.state.instances.values()] == ["terminated"]
    assert registry.items("machines.json")[0]["status"] == "terminated"
    assert journal_tos(lab)[-2:] == [("ready", "destroying"), ("destroying", "destroyed")]
    assert lab.sim.stats()["launches"] == 1

    # and the nightly audit finds the registry consistent
    assert lab.suite("audit", []) == 0, (lab.root / "audit.log").read_text()
