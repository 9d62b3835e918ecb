"""reap: rules and economics with the arithmetic; dry run by default; >= 2 observations; sync before destroy."""

from __future__ import annotations

from datetime import timedelta

from test_run import lines, ready_world

from gpuharness.core.clock import format_ts
from gpuharness.core.ledger import Ledger
from gpuharness.operations.reap import reap
from gpuharness.operations.run import run_job


def later(world, minutes):
    world.clock.now += timedelta(minutes=minutes)


def test_reap_dry_run_shows_what_and_why_and_acts_on_nothing(tmp_path):
    world, dep_id = ready_world(tmp_path)
    later(world, 20)
    reap(world.ctx)
    later(world, 20)
    [decision] = reap(world.ctx)
    assert decision.action == "destroy"
    assert any("idle_minutes rule" in r for r in decision.reasons)
    assert any(line.startswith("gap_cost") and "× $0.5" in line for line in decision.arithmetic)
    assert world.provider.terminate_calls == 0
    assert world.registry.deployment(dep_id).status == "ready"


def test_reap_never_judges_idleness_from_one_observation(tmp_path):
    world, _dep_id = ready_world(tmp_path)
    later(world, 600)
    [decision] = reap(world.ctx, apply=True)
    assert decision.action == "keep"
    assert any("1 idle observation(s)" in a for a in decision.arithmetic)
    assert world.provider.terminate_calls == 0


def test_reap_needs_observations_spanning_the_idle_window(tmp_path):
    world, dep_id = ready_world(tmp_path)
    later(world, 16)
    reap(world.ctx)
    later(world, 1)
    [decision] = reap(world.ctx, apply=True)
    assert decision.action == "keep"
    assert any("span 1.0 min < the 15 min window" in a for a in decision.arithmetic)
    assert world.registry.deployment(dep_id).status == "ready"


def test_reap_apply_syncs_artifacts_first_then_destroys(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    later(world, 16)
    reap(world.ctx)
    later(world, 16)
    [decision] = reap(world.ctx, apply=True, retrieve_to=tmp_path / "synced")
    assert decision.action == "destroyed"
    assert (tmp_path / "synced" / "J-000001" / "out.png").exists()
    assert lines(world)[-1]["reason"] == "artifacts synced"
    assert world.registry.deployment(dep_id).status == "destroyed"
    assert world.provider.terminate_calls == 1


def test_reap_progress_between_observations_restarts_the_idle_window(tmp_path):
    world, dep_id = ready_world(tmp_path)
    later(world, 16)
    reap(world.ctx)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    later(world, 16)
    [decision] = reap(world.ctx, apply=True, retrieve_to=tmp_path / "o")
    assert decision.action == "keep"
    assert world.provider.terminate_calls == 0


def test_reap_apply_refuses_while_a_job_is_running(tmp_path):
    world, dep_id = ready_world(tmp_path)
    from gpuharness.operations.run import run_lock
    with run_lock(world.ctx, dep_id):  # a live `gpuharness run` holds the deployment
        Ledger(world.registry.ledger_path).append({"id": "J-000009", "deployment_id": dep_id, "status": "running",
                                                   "ts": format_ts(world.clock.now)})
        later(world, 300)
        reap(world.ctx)
        later(world, 300)
        [decision] = reap(world.ctx, apply=True)
    assert decision.action == "busy" and "never reaped mid-job" in decision.reasons[0]
    assert world.provider.terminate_calls == 0


def test_reap_apply_refuses_to_destroy_when_artifacts_cannot_be_synced(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    (world.host.root / "gh-workspace/outputs/J-000001.png").unlink()
    later(world, 16)
    reap(world.ctx)
    later(world, 16)
    [decision] = reap(world.ctx, apply=True, retrieve_to=tmp_path / "o")
    assert decision.action == "refused"
    assert "could not be synced" in decision.reasons[-1]
    assert world.provider.terminate_calls == 0
    assert world.registry.deployment(dep_id).status == "ready"


def test_reap_max_hours_and_deadline_are_reasons(tmp_path):
    world, _dep_id = ready_world(tmp_path)
    with world.registry.update("deployments.json") as doc:
        deadline = format_ts(world.clock.now + timedelta(minutes=30))
        doc["deployments"][0]["shutdown_rule"] = {"max_hours": 1, "deadline": deadline}
    later(world, 90)
    [decision] = reap(world.ctx)
    assert decision.action == "destroy"
    assert any("max_hours" in r for r in decision.reasons) and any("deadline" in r for r in decision.reasons)


def test_reap_apply_marks_a_dead_runs_job_interrupted_first(tmp_path):
    world, dep_id = ready_world(tmp_path)
    Ledger(world.registry.ledger_path).append({"id": "J-000009", "deployment_id": dep_id, "status": "running",
                                               "ts": format_ts(world.clock.now)})
    reap(world.ctx, apply=True)
    assert lines(world)[-1]["status"] == "interrupted"


def test_reap_uses_keep_alive_economics_when_there_is_no_idle_rule(tmp_path):
    world, _dep_id = ready_world(tmp_path)
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["shutdown_rule"] = {"max_hours": 24}
    with world.registry.update("policy.json") as doc:
        doc.pop("max_idle_minutes", None)
    later(world, 13)
    reap(world.ctx, startup_minutes=12)
    later(world, 13)
    [decision] = reap(world.ctx, startup_minutes=12)
    assert decision.action == "destroy"
    assert any(r.startswith("keep-alive economics (no idle rule)") for r in decision.reasons)
    assert any("startup_cost" in a for a in decision.arithmetic)


def test_reap_apply_keeps_a_deployment_whose_outputs_moved_without_a_ledger_line(tmp_path):
    import os
    world, _dep_id = ready_world(tmp_path)
    later(world, 16)
    reap(world.ctx)
    later(world, 16)
    made = world.host.root / "gh-workspace" / "output" / "frame_0042.png"  # work the harness did not start
    made.parent.mkdir(parents=True)
    made.write_bytes(b"png")
    stamp = world.clock.now.timestamp()
    os.utime(made, (stamp, stamp))
    [decision] = reap(world.ctx, apply=True, retrieve_to=tmp_path / "o")
    assert decision.action == "keep"
    assert "output progress on the host" in decision.reasons[-1] and "frame_0042.png" in decision.reasons[-1]
    assert world.provider.terminate_calls == 0


def test_reap_treats_a_future_created_at_as_suspect_not_young(tmp_path):
    # issue 18 held-out: a deployment created "a year from now" was kept by reap as young
    world, _dep_id = ready_world(tmp_path)
    with world.registry.update("deployments.json") as doc:
        future = format_ts(world.clock.now + timedelta(days=365))
        doc["deployments"][0]["created_at"] = future
        doc["deployments"][0]["ready_at"] = future
    [decision] = reap(world.ctx)
    assert decision.action == "destroy"
    assert any("in the future" in r and "suspect" in r for r in decision.reasons)
