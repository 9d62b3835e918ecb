"""provision --resume: waits again for an instance that never came up, launches nothing twice, and says what to do
where there is nothing to resume."""

from __future__ import annotations

import pytest
from lifecycle_fakes import make_world

from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import read_journal
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.resume import resume_provision


def request(**fields):
    base = dict(provider="vast", gpu="RTX 4090", image="comfyui:latest", cost_hr=0.5, runtime="comfyui",
                model="minimax-h3", workflow="h3-text-to-video", idle_minutes=15, deployment_id="dep_slow")
    base.update(fields)
    return ProvisionRequest(**base)


def never_up(tmp_path):
    world = make_world(tmp_path)
    world.provider.polls_until_running = 10**6
    with pytest.raises(UserError, match="did not come up") as info:
        provision(world.ctx, request(), up_deadline_s=30, poll_s=10)
    assert "gpuharness provision --resume dep_slow" in info.value.line()
    assert "gpuharness destroy dep_slow --confirm dep_slow" in info.value.line()
    return world


def test_resume_waits_again_for_the_same_instance_and_records_its_route(tmp_path):
    world = never_up(tmp_path)
    world.provider.polls_until_running = 1
    result = resume_provision(world.ctx, "dep_slow", up_deadline_s=60, poll_s=5)
    dep = result.deployment
    assert dep.status == "provisioning" and dep.instance_id == "i-1" and dep.ssh_route is not None
    assert world.provider.launch_calls == 1, "resumed, not launched again"
    moves = [(e["from"], e["to"]) for e in read_journal(world.registry.journal_path) if e.get("to")]
    assert ("error", "provisioning") in moves
    assert list(read_journal(world.registry.journal_path))[-1]["next_action"] == "gpuharness install dep_slow"


def test_a_resume_that_times_out_again_is_error_with_the_same_way_on(tmp_path):
    world = never_up(tmp_path)
    with pytest.raises(UserError, match="did not come up") as info:
        resume_provision(world.ctx, "dep_slow", up_deadline_s=20, poll_s=10)
    assert "gpuharness provision --resume dep_slow" in info.value.line()
    assert world.registry.deployment("dep_slow").status == "error"
    assert world.provider.launch_calls == 1


def test_a_resume_whose_instance_is_gone_names_the_destroy(tmp_path):
    world = never_up(tmp_path)
    world.provider.instances.clear()
    with pytest.raises(UserError, match="is gone at vast") as info:
        resume_provision(world.ctx, "dep_slow", up_deadline_s=20, poll_s=10)
    assert "gpuharness destroy dep_slow --confirm dep_slow" in info.value.line()
    assert world.registry.deployment("dep_slow").status == "error"


def test_nothing_to_resume_names_the_next_step(tmp_path):
    world = make_world(tmp_path)
    provision(world.ctx, request(), poll_s=5)
    with pytest.raises(UserError, match="no cut-short provision to resume") as info:
        resume_provision(world.ctx, "dep_slow")
    assert "gpuharness install dep_slow" in info.value.line()
