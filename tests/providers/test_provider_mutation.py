"""Launch and terminate with reconciliation against the simulator: lost answers never duplicate an instance."""

from __future__ import annotations

from typing import Any

import pytest
from provider_time import FakeTime

from gpuharness.providers.base import Instance, LaunchSpec, ProviderError, UnknownOutcome
from gpuharness.providers.factory import PhaseOptions, build_provider
from gpuharness.providers.mutation import launch_reconciled, terminate_reconciled
from gpuharness.sim import Simulator

ENV = {"SIM_KEY": "sim-key-0123456789abcdefghij"}
GPU = {"runpod": "NVIDIA GeForce RTX 4090", "vast": "RTX 4090", "massed": "gpu_1x_a6000"}


def provider(sim: Simulator, kind: str, fake: FakeTime | None = None):
    fake = fake or FakeTime()
    options = PhaseOptions(sleep=fake.sleep, monotonic=fake.monotonic, wall=fake.wall, rng=fake.rng())
    return build_provider({"name": kind, "kind": kind, "credential_env": "SIM_KEY", "api_base": sim.url(kind)},
                          env=ENV, options=options)


def spec(kind: str, key: str) -> LaunchSpec:
    return LaunchSpec(gpu=GPU[kind], image="7" if kind == "massed" else "runpod/pytorch:2.4.0", idempotency_key=key)


def test_100_launches_with_the_response_dropped_after_commit_create_exactly_100(sim: Simulator):
    journal: list[dict[str, Any]] = []
    sim.inject(provider="runpod", fault="drop_after_commit", count=100)
    pods = provider(sim, "runpod")
    ids = [launch_reconciled(pods, spec("runpod", f"gh-drop-{n:03d}"), journal.append).id for n in range(100)]
    stats = sim.stats()
    assert stats["faults_fired"]["drop_after_commit"] == 100
    assert stats["launches"] == 100 and stats["instances"] == 100
    assert len(set(ids)) == 100
    names = sorted(i.name for i in pods.list_instances())
    assert names == [f"gh-drop-{n:03d}" for n in range(100)]
    assert sum(1 for e in journal if e["event"] == "reconciled") == 100


def test_100_vast_launches_dropped_after_commit_create_exactly_100_through_the_v1_list(sim: Simulator):
    journal: list[dict[str, Any]] = []
    sim.inject(provider="vast", fault="drop_after_commit", count=100, route="asks")
    vast = provider(sim, "vast")
    ids = [launch_reconciled(vast, spec("vast", f"gh-vdrop-{n:03d}"), journal.append).id for n in range(100)]
    stats = sim.stats()
    assert stats["faults_fired"]["drop_after_commit"] == 100
    assert stats["launches"] == 100 and stats["instances"] == 100 and len(set(ids)) == 100
    assert sorted(i.idempotency_key for i in vast.list_instances()) == [f"gh-vdrop-{n:03d}" for n in range(100)]
    assert sum(1 for e in journal if e["event"] == "reconciled") == 100


@pytest.mark.parametrize("kind", ["runpod", "vast", "massed"])
def test_dropped_launch_is_reconciled_by_key_on_every_provider(sim: Simulator, kind: str):
    journal: list[dict[str, Any]] = []
    sim.inject(provider=kind, fault="drop_after_commit", count=1)
    found = launch_reconciled(provider(sim, kind), spec(kind, f"gh-{kind}-1"), journal.append)
    assert found.idempotency_key == f"gh-{kind}-1" or found.name == f"gh-{kind}-1"
    assert sim.stats()["launches"] == 1
    assert [e["event"] for e in journal] == ["attempt", "unknown_outcome", "reconciled"]


def test_an_existing_instance_with_the_key_is_returned_without_launching(sim: Simulator):
    pods = provider(sim, "runpod")
    first = launch_reconciled(pods, spec("runpod", "gh-once"), lambda e: None)
    again = launch_reconciled(pods, spec("runpod", "gh-once"), lambda e: None)
    assert again.id == first.id and sim.stats()["launches"] == 1


def test_server_error_on_launch_that_created_nothing_launches_again(sim: Simulator):
    journal: list[dict[str, Any]] = []
    sim.inject(provider="runpod", fault="server_error", count=1, route="/runpod/v2/pods")
    # the read before launching would also suffer it: check_first=False so the launch takes the 500
    fake = FakeTime()
    found = launch_reconciled(provider(sim, "runpod"), spec("runpod", "gh-retry"), journal.append, check_first=False,
                              sleep=fake.sleep)
    assert [e["event"] for e in journal] == ["attempt", "unknown_outcome", "not_listed_yet", "nothing_created",
                                             "attempt", "created"]
    assert found.name == "gh-retry" and sim.stats()["launches"] == 1 and fake.sleeps == [5.0]


class LateCommitProvider:
    """A provider whose launch times out and whose instance shows up in the list only later."""

    name = "late"
    kind = "runpod"
    supports_stop = False

    def __init__(self, listings_before_visible: int) -> None:
        self.hidden_for = listings_before_visible
        self.launches = 0
        self.created: list[Instance] = []

    def launch(self, spec: LaunchSpec) -> Instance:
        self.launches += 1
        self.created.append(Instance(provider="late", id=f"i{self.launches}", status="pending",
                                     name=spec.idempotency_key))
        raise UnknownOutcome("ReadTimeout", provider="late")

    def list_instances(self) -> list[Instance]:
        self.hidden_for -= 1
        return list(self.created) if self.hidden_for < 0 else []


def test_a_late_commit_is_found_by_settling_before_any_relaunch():
    late = LateCommitProvider(listings_before_visible=2)
    fake = FakeTime()
    journal: list[dict[str, Any]] = []
    found = launch_reconciled(late, spec("runpod", "gh-late"), journal.append, check_first=False, settle_polls=3,
                              settle_s=4.0, sleep=fake.sleep)
    assert found.id == "i1" and late.launches == 1 and fake.sleeps == [4.0, 4.0]
    assert [e["event"] for e in journal][-1] == "reconciled"


def test_too_short_a_settle_window_would_duplicate_so_the_default_polls_more_than_once():
    late = LateCommitProvider(listings_before_visible=1)
    launch_reconciled(late, spec("runpod", "gh-late"), lambda e: None, check_first=False, sleep=FakeTime().sleep)
    assert late.launches == 1


def test_capacity_refusals_stop_at_max_attempts(sim: Simulator):
    journal: list[dict[str, Any]] = []
    sim.inject(provider="runpod", fault="capacity", count=10)
    with pytest.raises(ProviderError) as caught:
        launch_reconciled(provider(sim, "runpod"), spec("runpod", "gh-full"), journal.append, max_attempts=2)
    assert caught.value.kind == "capacity" and "after 2 attempt(s)" in str(caught.value)
    assert sim.stats()["requests"]["POST /runpod/v2/pods"] == 2 and sim.stats()["instances"] == 0
    assert [e["event"] for e in journal].count("attempt") == 2


def test_auth_refusal_is_not_retried():
    with Simulator(api_keys={"runpod": "the-only-good-key-0123456789"}) as sim:
        with pytest.raises(ProviderError) as caught:
            launch_reconciled(provider(sim, "runpod"), spec("runpod", "gh-a"), lambda e: None, check_first=False)
        assert sim.stats()["requests"]["POST /runpod/v2/pods"] == 1
    assert caught.value.kind == "auth"


def test_failed_reconcile_listing_stays_unknown_and_does_not_relaunch(sim: Simulator):
    # the launch is committed but its answer dropped; then the listing fails on all 3 read attempts
    sim.inject(provider="runpod", fault="drop_after_commit", count=1)
    sim.inject(provider="runpod", fault="server_error", count=3)
    pods = provider(sim, "runpod")
    with pytest.raises(UnknownOutcome, match="status --refresh"):
        launch_reconciled(pods, spec("runpod", "gh-unsure"), lambda e: None, check_first=False)
    assert sim.stats()["launches"] == 1


@pytest.mark.parametrize("kind", ["runpod", "vast", "massed"])
def test_terminate_with_dropped_answer_is_verified_gone_by_listing(sim: Simulator, kind: str):
    target = provider(sim, kind)
    created = launch_reconciled(target, spec(kind, f"gh-t-{kind}"), lambda e: None)
    journal: list[dict[str, Any]] = []
    sim.inject(provider=kind, fault="drop_after_commit", count=1)
    assert terminate_reconciled(target, created.id, journal.append) is True
    assert [e["event"] for e in journal] == ["attempt", "unknown_outcome", "verified_gone"]
    assert sim.stats()["instances"] == 0
