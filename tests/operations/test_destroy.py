"""destroy: --confirm the exact id, refuse with unsynced artifacts, reconcile an ambiguous terminate."""

from __future__ import annotations

import pytest
from lifecycle_fakes import FakeExecutor
from test_run import lines, ready_world

from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import read_journal
from gpuharness.operations.destroy import destroy
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.run import run_job


def test_destroy_requires_the_exact_id_to_confirm(tmp_path):
    world, dep_id = ready_world(tmp_path)
    for wrong in (None, "dep", dep_id + " "):
        with pytest.raises(UserError, match=f"--confirm {dep_id}"):
            destroy(world.ctx, dep_id, confirm=wrong)
    assert world.provider.terminate_calls == 0
    assert world.registry.deployment(dep_id).status == "ready"


def test_destroy_refuses_when_artifacts_not_synced(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    with pytest.raises(UserError, match="artifacts not synced") as info:
        destroy(world.ctx, dep_id, confirm=dep_id)
    assert "J-000001/out.png" in info.value.line() and "gpuharness retrieve" in info.value.line()
    assert world.provider.terminate_calls == 0
    assert world.registry.deployment(dep_id).status == "ready"


def test_destroy_after_retrieve_terminates_verifies_and_keeps_history(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    retrieve(world.ctx, dep_id, tmp_path / "out")
    result = destroy(world.ctx, dep_id, confirm=dep_id)
    dep = world.registry.deployment(dep_id)
    assert dep.status == "destroyed" and dep.destroyed_at
    assert result.verified and result.terminate_calls == 1
    assert world.provider.instances["i-1"].status == "terminated"
    [machine] = world.registry.items("machines.json")
    assert machine["status"] == "terminated"
    assert [j["to"] for j in read_journal(world.registry.journal_path)][-2:] == ["destroying", "destroyed"]


def test_destroy_discard_artifacts_is_recorded_on_the_ledger(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    result = destroy(world.ctx, dep_id, confirm=dep_id, discard_artifacts=True)
    assert result.discarded == ("J-000001/out.png",)
    last = lines(world)[-1]
    assert last["correction"] is True and "discarded" in last["reason"]
    assert last["artifacts"][0]["discarded"] is True


def test_destroy_refuses_while_a_job_is_running(tmp_path):
    world, dep_id = ready_world(tmp_path)
    from gpuharness.core.ledger import Ledger
    Ledger(world.registry.ledger_path).append({"id": "J-9", "deployment_id": dep_id, "status": "running"})
    with pytest.raises(UserError, match="still running"):
        destroy(world.ctx, dep_id, confirm=dep_id, discard_artifacts=True)
    assert world.provider.terminate_calls == 0


def test_destroy_reconciles_a_dropped_terminate_response_without_repeating(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.provider.faults = ["terminate:drop"]
    result = destroy(world.ctx, dep_id, confirm=dep_id)
    assert result.terminate_calls == 1 and world.provider.terminate_calls == 1
    assert world.registry.deployment(dep_id).status == "destroyed"


def test_destroy_refuses_an_already_destroyed_deployment(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host)
    destroy(world.ctx, dep_id, confirm=dep_id)
    with pytest.raises(UserError, match="already destroyed"):
        destroy(world.ctx, dep_id, confirm=dep_id)
    assert world.provider.terminate_calls == 1
