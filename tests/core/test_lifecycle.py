"""Specifications of the lifecycle table and the transition journal."""

from __future__ import annotations

import itertools

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import ALLOWED, LIVE, STATES, allowed, read_journal, transition
from gpuharness.core.registry import Registry

HAPPY_PATH = ["installing", "configuring", "health-checking", "ready", "running", "ready", "retrieving",
              "destroying", "destroyed"]


@pytest.fixture
def provisioning(registry: Registry, deployment_item) -> Registry:
    with registry.update("deployments.json") as doc:
        doc["deployments"].append(deployment_item("dep_p", "provisioning"))
    return registry


def test_the_table_covers_every_state_and_names_only_states() -> None:
    assert set(ALLOWED) == set(STATES)
    for targets in ALLOWED.values():
        assert targets <= set(STATES)
    assert "destroyed" not in LIVE


def test_the_design_path_is_allowed_step_by_step() -> None:
    states = ["provisioning", *HAPPY_PATH]
    for current, target in itertools.pairwise(states):
        assert allowed(current, target), f"{current} -> {target}"


@pytest.mark.parametrize(("current", "target"), [
    ("provisioning", "ready"),   # ready only through health-checking
    ("installing", "ready"),
    ("configuring", "running"),
    ("stopped", "ready"),        # leaving stopped goes through health again
    ("destroyed", "provisioning"),
    ("destroyed", "error"),
    ("running", "destroyed"),    # destroy goes through destroying
    ("error", "ready"),
])
def test_the_table_refuses(current: str, target: str) -> None:
    assert not allowed(current, target)


@pytest.mark.parametrize("state", [s for s in STATES if s != "destroyed"])
def test_error_is_reachable_from_every_live_state(state: str) -> None:
    assert allowed(state, "error")


def test_only_health_checking_leads_to_ready() -> None:
    assert {s for s in STATES if allowed(s, "ready")} == {"health-checking", "running", "retrieving"}


def test_every_transition_is_journaled_in_order(provisioning: Registry) -> None:
    for target in HAPPY_PATH:
        transition(provisioning, "dep_p", target, route="ssh://127.0.0.1:2222", next_action="next")
    entries = [e for e in read_journal(provisioning.journal_path) if e["deployment"] == "dep_p"]
    assert [(e["from"], e["to"]) for e in entries] == list(zip(["provisioning", *HAPPY_PATH], HAPPY_PATH,
                                                               strict=False))
    assert all(e["route"] == "ssh://127.0.0.1:2222" and e["provider"] == "vast" and e["target_id"] == "inst-1"
               for e in entries)
    final = provisioning.deployment("dep_p")
    assert final.status == "destroyed" and final.destroyed_at.endswith("Z")


def test_a_refused_transition_changes_nothing_and_journals_nothing(provisioning: Registry) -> None:
    before = provisioning.path("deployments.json").read_bytes()
    with pytest.raises(UserError, match="cannot go from provisioning to ready") as caught:
        transition(provisioning, "dep_p", "ready")
    assert "allowed from provisioning" in (caught.value.hint or "")
    assert provisioning.path("deployments.json").read_bytes() == before
    assert provisioning.journal_path.read_bytes() == b""


def test_transition_sets_extra_fields_in_the_same_write(provisioning: Registry) -> None:
    for target in ("installing", "configuring", "health-checking"):
        transition(provisioning, "dep_p", target)
    result = transition(provisioning, "dep_p", "ready", ready_at="2026-11-02T09:20:00Z",
                        health={"test_generation": "ok"})
    assert result.ready_at == "2026-11-02T09:20:00Z"
    assert provisioning.deployment("dep_p").health == {"test_generation": "ok"}


def test_transition_with_a_field_breaking_the_schema_saves_and_journals_nothing(provisioning: Registry) -> None:
    before = provisioning.path("deployments.json").read_bytes()
    with pytest.raises(UserError):
        transition(provisioning, "dep_p", "installing", cost_hr="cheap")
    assert provisioning.path("deployments.json").read_bytes() == before
    assert list(read_journal(provisioning.journal_path)) == []


def test_transition_of_an_unknown_deployment_is_a_user_error(registry: Registry) -> None:
    with pytest.raises(UserError, match="no deployment 'dep_zz'"):
        transition(registry, "dep_zz", "error")


def test_error_keeps_the_reason(registry: Registry) -> None:
    transition(registry, "dep_a", "error", error="CUDA driver mismatch")
    assert registry.deployment("dep_a").error == "CUDA driver mismatch"
    assert [e["to"] for e in read_journal(registry.journal_path)] == ["error"]


def test_journal_reader_skips_a_torn_tail_and_names_a_broken_middle_line(registry: Registry) -> None:
    transition(registry, "dep_a", "running")
    with open(registry.journal_path, "ab") as handle:
        handle.write(b'{"ts": "2026-')
    assert len(list(read_journal(registry.journal_path))) == 1
    with open(registry.journal_path, "ab") as handle:
        handle.write(b"\n")
    transition(registry, "dep_a", "ready")
    with pytest.raises(UserError) as caught:
        list(read_journal(registry.journal_path))
    assert caught.value.place == "2:14"  # line:column


def test_live_burn_counts_what_bills_and_leaves_out_stopped_and_destroyed():
    from gpuharness.core.deployment import Deployment
    from gpuharness.core.lifecycle import live_burn

    deployments = [{"status": "running", "cost_hr": 0.7}, {"status": "provisioning", "cost_hr": 2.0},
                   {"status": "stopped", "cost_hr": 3.0}, {"status": "destroyed", "cost_hr": 9.0},
                   {"status": "error", "cost_hr": 0.3}]
    burn, count = live_burn(Deployment.from_json({"id": f"d{n}", "provider": "vast",
                                                  "created_at": "2026-11-30T20:00:00Z", **d})
                            for n, d in enumerate(deployments))
    assert count == 3 and abs(burn - 3.0) < 1e-9
