"""A deadline on the launch phase (issue 18, item 4): whatever the retry counts, provision's launch phase ends by
the policy's launch_deadline_s, with one line, when the provider answers 429 forever."""

from __future__ import annotations

import pytest
from lifecycle_fakes import FakeClock

from gpuharness.core.errors import UserError
from gpuharness.core.policy import LAUNCH_DEADLINE_S, Policy
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.launch import launch_instance
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.providers.base import LaunchSpec, ProviderError

LAUNCH = "/asks/"  # Vast's launch route


@pytest.fixture
def lab(tmp_path):
    clock = FakeClock()
    with SimulatedEstate(tmp_path / "lab", sleep=clock.sleep, say=lambda line: None) as lab:
        lab.ctx.clock = clock
        lab.sim.inject(provider="vast", fault="rate_limit", count=-1, retry_after=30, route=LAUNCH)
        yield lab, clock


def request() -> ProvisionRequest:
    return ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.35, idle_minutes=15,
                            deployment_id="dep_deadline")


def test_held_out_a_provider_answering_429_forever_stops_at_the_launch_deadline(lab):
    lab, clock = lab
    with lab.registry.update("policy.json") as document:
        document["retry"]["max_launch_attempts"] = 10  # the schema's most
        document["launch_deadline_s"] = 75
    with pytest.raises(UserError, match="deadline") as info:
        provision(lab.ctx, request(), up_deadline_s=30, poll_s=0.1)
    assert "\n" not in info.value.line() and "launch phase's deadline" in info.value.line()
    assert sum(clock.slept) <= 75, clock.slept  # never waited past the deadline
    assert lab.registry.deployment("dep_deadline").status == "destroyed"  # nothing was created


def test_huge_attempt_counts_end_at_the_deadline_too(lab):
    lab, clock = lab
    provider = lab.ctx.provider_for("vast")
    calls: list[float] = []

    def sleep(seconds: float) -> None:
        calls.append(seconds)
        if len(calls) > 100:
            raise AssertionError("the launch phase ran on past 100 waits")
        clock.sleep(seconds)

    policy = Policy({"retry": {"max_launch_attempts": 10**9}, "launch_deadline_s": 600})
    spec = LaunchSpec(gpu="RTX 4090", image="comfyui:1", idempotency_key="gh-huge", max_cost_hr=0.35)
    try:
        with pytest.raises(ProviderError, match="launch phase's deadline"):
            launch_instance(provider, spec, policy=policy, sleep=sleep, clock=clock)
    finally:
        provider.close()
    assert sum(calls) <= 600 and len(calls) < 100


def test_the_default_launch_deadline_is_fifteen_minutes():
    assert Policy({}).launch_deadline_s == LAUNCH_DEADLINE_S == 900.0
