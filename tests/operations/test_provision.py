"""provision: policy before any provider call, disclosure, reuse, idempotent launch, records and journal."""

from __future__ import annotations

import pytest
from lifecycle_fakes import make_world

from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import read_journal
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.providers.base import LaunchSpec
from gpuharness.providers.vast import VastAi


def request(**fields):
    base = dict(provider="vast", gpu="RTX 4090", image="comfyui:latest", cost_hr=0.5, runtime="comfyui",
                model="minimax-h3", workflow="h3-text-to-video", idle_minutes=15)
    base.update(fields)
    return ProvisionRequest(**base)


def test_provision_records_machine_deployment_and_journal(tmp_path):
    world = make_world(tmp_path)
    result = provision(world.ctx, request(), poll_s=5)
    dep = world.registry.deployment(result.deployment.id)
    assert dep.status == "provisioning"
    assert dep.instance_id == "i-1"
    assert dep.idempotency_key == f"gh-{dep.id}"
    assert dep.ssh.host == "127.0.0.1"
    assert dep.shutdown_rule.to_json() == {"idle_minutes": 15}
    machines = world.registry.items("machines.json")
    assert [(m["instance_id"], m["status"]) for m in machines] == [("i-1", "running")]
    assert machines[0]["labels"]["gh_key"] == dep.idempotency_key
    journal = list(read_journal(world.registry.journal_path))
    assert journal[0]["from"] is None and journal[0]["to"] == "provisioning"
    assert journal[0]["target_id"] is None  # recorded before the launch call
    assert journal[-1]["next_action"] == f"gpuharness install {dep.id}"
    assert world.provider.launch_calls == 1


def test_provision_prints_disclosure_before_launch(tmp_path):
    world = make_world(tmp_path)
    provision(world.ctx, request(region="us-east", checkpoint_path="/workspace/ckpt"))
    text = "\n".join(world.said)
    for expected in ("vast", "Vast.ai instance", "1 x RTX 4090", "comfyui:latest", "us-east", "$0.500/hr",
                     "idle 15 min", "/workspace/ckpt", "quantity:        1 instance"):
        assert expected in text


@pytest.mark.parametrize(("policy", "fields", "ceiling"), [
    ({"max_cost_hr": 0.4}, {}, "max_cost_hr"),
    ({"allowed_providers": ["runpod"]}, {}, "allowed_providers"),
    ({"require_shutdown_rule": True}, {"idle_minutes": None}, "require_shutdown_rule"),
    ({"max_concurrent_deployments": 0}, {}, "max_concurrent_deployments"),
])
def test_provision_refuses_before_any_provider_call(tmp_path, policy, fields, ceiling):
    world = make_world(tmp_path, policy=policy)
    with pytest.raises(UserError) as info:
        provision(world.ctx, request(**fields))
    assert info.value.place == ceiling
    assert "nothing was launched" in info.value.line()
    assert world.provider.launch_calls == 0 and world.provider.list_calls == 0
    assert world.registry.deployments() == []


def test_provision_refuses_concurrency_counting_live_deployments(tmp_path):
    world = make_world(tmp_path, policy={"max_concurrent_deployments": 1})
    provision(world.ctx, request())
    with pytest.raises(UserError, match="max_concurrent_deployments"):
        provision(world.ctx, request(gpu="RTX 5090"))
    assert world.provider.launch_calls == 1


def test_provision_reuses_a_live_matching_deployment(tmp_path):
    world = make_world(tmp_path)
    first = provision(world.ctx, request())
    second = provision(world.ctx, request())
    assert second.reused and second.deployment.id == first.deployment.id
    assert world.provider.launch_calls == 1
    assert len(world.registry.deployments()) == 1


def test_provision_reconciles_a_dropped_launch_response_without_a_second_launch(tmp_path):
    world = make_world(tmp_path)
    world.provider.faults = ["launch:drop"]
    result = provision(world.ctx, request())
    assert world.provider.launch_calls == 1
    assert len(world.provider.instances) == 1
    assert result.deployment.instance_id == "i-1"
    journal = list(read_journal(world.registry.journal_path))
    markers = [j["marker"] for j in journal if j.get("note") == "launched"]
    assert markers == [{"key": "gh-dep_minimaxh3_01", "reconciled": True}]
    launch = [j["marker"]["launch"] for j in journal if isinstance(j.get("marker"), dict) and "launch" in j["marker"]]
    attempts = [m for m in launch if m["event"] == "attempt"]
    assert len(attempts) == 1  # one launch call, journaled as its own entry (not a count)


def test_provision_waits_retry_after_on_429_then_launches_once(tmp_path):
    world = make_world(tmp_path)
    world.provider.faults = ["launch:429"]
    provision(world.ctx, request())
    assert world.provider.launch_calls == 2 and len(world.provider.instances) == 1
    assert world.clock.slept[0] >= 7  # max(Retry-After, backoff)


def test_provision_capacity_error_leaves_history_and_nothing_live(tmp_path):
    world = make_world(tmp_path)
    world.provider.faults = ["launch:capacity", "launch:capacity"]
    with pytest.raises(UserError, match="capacity") as info:
        provision(world.ctx, request())
    assert "nothing was created" in info.value.line()
    assert world.provider.launch_calls == 2  # policy retry.max_launch_attempts, each one refused
    [dep] = world.registry.deployments()
    assert dep.status == "destroyed" and dep.destroyed_at
    statuses = [j["to"] for j in read_journal(world.registry.journal_path) if j["from"] != j["to"]]
    assert statuses == ["provisioning", "error", "destroying", "destroyed"]


def test_provision_interruptible_is_refused_where_unsupported(tmp_path):
    world = make_world(tmp_path)
    with world.registry.update("providers.json") as doc:
        doc["providers"].append({"name": "massed", "kind": "massed"})
    with pytest.raises(UserError, match="interruptible"):
        provision(world.ctx, request(provider="massed", interruptible=True))
    assert world.provider.launch_calls == 0


def test_provision_interruptible_on_vast_needs_a_bid(tmp_path):
    world = make_world(tmp_path)
    with pytest.raises(UserError, match="bid-price"):
        provision(world.ctx, request(interruptible=True))
    assert world.provider.launch_calls == 0


def test_provision_interruptible_is_recorded_where_supported(tmp_path):
    world = make_world(tmp_path)
    result = provision(world.ctx, request(interruptible=True, bid_price=0.3))
    assert result.deployment.interruptible is True
    assert "interruptible, bid $0.300/hr" in "\n".join(world.said)


def test_provision_times_out_waiting_and_marks_error(tmp_path):
    world = make_world(tmp_path)
    world.provider.polls_until_running = 10**6
    with pytest.raises(UserError, match="did not come up"):
        provision(world.ctx, request(), up_deadline_s=30, poll_s=10)
    [dep] = world.registry.deployments()
    assert dep.status == "error" and dep.instance_id == "i-1"


def test_provision_runpod_serverless_registers_the_endpoint_without_launching(tmp_path):
    world = make_world(tmp_path)
    with world.registry.update("providers.json") as doc:
        doc["providers"].append({"name": "rp-sls", "kind": "runpod-serverless", "endpoint_id": "abc123",
                                 "api_base": "http://127.0.0.1:9/runpod-serverless"})
    result = provision(world.ctx, request(provider="rp-sls", runtime=None))
    dep = result.deployment
    assert dep.status == "health-checking" and dep.ssh is None and dep.runtime == "serverless"
    assert dep.endpoint == "http://127.0.0.1:9/runpod-serverless/v2/abc123"
    assert world.provider.launch_calls == 0 and world.provider.list_calls == 0


def test_provision_destroys_when_the_provider_bills_more_than_accepted(tmp_path):
    world = make_world(tmp_path)
    world.provider.cost_hr = 0.9
    with pytest.raises(UserError, match=r"bills \$0.900/hr .* above the allowed \$0.500/hr: it was destroyed"):
        provision(world.ctx, request(cost_hr=0.5))
    [dep] = world.registry.deployments()
    assert dep.status == "destroyed" and dep.cost_hr == 0.9
    assert [i.status for i in world.provider.instances.values()] == ["terminated"]
    assert any(line.startswith("REFUSED: the provider bills $0.900/hr") for line in world.said)
    notes = [j.get("note") or "" for j in read_journal(world.registry.journal_path)]
    assert any("above the allowed $0.500/hr" in note for note in notes)


def test_provision_resumes_a_record_whose_launch_answer_was_never_seen(tmp_path):
    world = make_world(tmp_path)
    from gpuharness.operations.provision import reserve, stewarded
    reservation = reserve(world.ctx, stewarded(request()), VastAi.capabilities, VastAi.kind)
    assert reservation.claim is not None
    reservation.claim.release()  # a provision that died right after its record: its claim is free
    record = reservation.deployment
    world.provider.launch(LaunchSpec(gpu="RTX 4090", image="comfyui:latest",
                                     idempotency_key=record.idempotency_key))
    calls = world.provider.launch_calls
    result = provision(world.ctx, request())
    assert result.deployment.id == record.id and result.deployment.instance_id == "i-1"
    assert world.provider.launch_calls == calls and len(world.provider.instances) == 1


def test_provision_unknown_outcome_it_cannot_check_is_never_called_nothing_created(tmp_path):
    world = make_world(tmp_path)
    from gpuharness.providers.base import UnknownOutcome

    def lost(spec):
        raise UnknownOutcome("answer lost and the listing failed", provider="vast")

    world.provider.launch = lost
    with pytest.raises(UserError, match="outcome unknown") as info:
        provision(world.ctx, request())
    assert "status --refresh" in info.value.line()
    [dep] = world.registry.deployments()
    assert dep.status == "error"
    # it had in fact been created; provisioning again adopts it by key instead of launching a second one
    del world.provider.launch
    world.provider.launch(LaunchSpec(gpu="RTX 4090", image="comfyui:latest", idempotency_key=dep.idempotency_key))
    again = provision(world.ctx, request())
    assert again.deployment.id == dep.id and again.deployment.instance_id == "i-1"
    assert len(world.provider.instances) == 1 and world.provider.launch_calls == 1


def test_provision_refuses_a_policy_with_no_ceiling_at_all(tmp_path):
    # issue 18 held-out: a policy.json holding only schema_version let a $50/hr provision through silently
    world = make_world(tmp_path)
    with world.registry.update("policy.json") as doc:
        doc.clear()
        doc["schema_version"] = 1
    with pytest.raises(UserError, match="no ceiling"):
        provision(world.ctx, request(cost_hr=50.0))
    assert world.provider.launch_calls == 0
    with world.registry.update("policy.json") as doc:
        doc.update({"ceilings": "none", "reason": "a lab account"})
    provision(world.ctx, request(cost_hr=50.0))
    assert world.provider.launch_calls == 1


def test_provision_refuses_an_id_that_is_taken_and_changes_nothing(tmp_path):
    world = make_world(tmp_path)
    provision(world.ctx, request(deployment_id="dep_x"), poll_s=5)
    before = world.registry.path("deployments.json").read_bytes()
    with pytest.raises(UserError, match="deployment id 'dep_x' already exists") as info:
        provision(world.ctx, request(deployment_id="dep_x", gpu="RTX 3090"), poll_s=5)
    assert "ids are never reused" in info.value.line()
    assert world.registry.path("deployments.json").read_bytes() == before
    assert world.provider.launch_calls == 1
