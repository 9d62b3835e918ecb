"""The typed deployment: read from deployments.json, written back without losing what people wrote, and the
facts every operation derives from it (one owner each)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from gpuharness.core.deployment import DEFAULT_WORKSPACE, Deployment, SshAccess, live_burn
from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import transition
from gpuharness.core.registry import Registry

TS = "2026-11-30T20:00:00Z"


def record(**fields):
    return {"id": "dep_a", "provider": "vast", "status": "ready", "cost_hr": 0.5, "created_at": TS, **fields}


@pytest.fixture
def registry(tmp_path) -> Registry:
    registry = Registry(tmp_path / "r")
    registry.init()
    with registry.update("deployments.json") as document:
        document["deployments"] = [record(note_for_humans="keep me", ssh={"host": "10.0.0.1", "vpn": "wg0"}),
                                   record(id="dep_b", status="destroyed")]
    return registry


def test_a_record_read_and_written_back_is_the_same_json():
    raw = record(gpu="RTX 4090", ssh=None, ready_at=None, shutdown_rule={"idle_minutes": 20}, custom={"x": [1]})
    assert Deployment.from_json(raw).to_json() == raw


def test_a_change_keeps_unknown_fields_people_wrote(registry):
    transition(registry, "dep_a", "running", note="a job")
    written = json.loads(registry.path("deployments.json").read_text())["deployments"][0]
    assert written["note_for_humans"] == "keep me" and written["ssh"] == {"host": "10.0.0.1", "vpn": "wg0"}
    assert written["status"] == "running"


def test_lookup_by_an_unknown_id_is_one_line_naming_the_known_ids(registry):
    with pytest.raises(UserError) as caught:
        registry.deployment("dep_zz")
    assert "no deployment 'dep_zz' (known: dep_a, dep_b)" in caught.value.line()
    assert "\n" not in caught.value.line()


def test_add_refuses_an_id_that_is_taken_and_changes_nothing(registry):
    before = registry.path("deployments.json").read_bytes()
    with pytest.raises(UserError, match="already exists"):
        registry.add_deployment(lambda deployments: Deployment.from_json(record(id="dep_b")))
    assert registry.path("deployments.json").read_bytes() == before


def test_the_workspace_has_one_default_and_the_ssh_block_overrides_it():
    assert Deployment.from_json(record()).workspace == DEFAULT_WORKSPACE == "gh-workspace"
    assert Deployment.from_json(record(ssh={"host": "h", "workspace": "/data/ws"})).workspace == "/data/ws"


def test_the_ssh_route_is_the_journal_label_or_none_without_an_ssh_block():
    assert Deployment.from_json(record(ssh={"host": "1.2.3.4", "port": 2222})).ssh_route == "ssh root@1.2.3.4:2222"
    assert Deployment.from_json(record(ssh={"host": "h", "user": "ubuntu"})).ssh_route == "ssh ubuntu@h:22"
    assert Deployment.from_json(record(ssh=None)).ssh_route is None
    assert Deployment.from_json(record(ssh={})).ssh_route is None


def test_serverless_is_the_runtime_whatever_else_the_record_holds():
    assert Deployment.from_json(record(runtime="serverless")).is_serverless
    assert Deployment.from_json(record(runtime="serverless", ssh={"host": "h"})).is_serverless
    assert not Deployment.from_json(record(runtime="comfyui", ssh=None)).is_serverless


@pytest.mark.parametrize(("status", "bills"), [("ready", True), ("provisioning", True), ("error", True),
                                               ("stopped", False), ("destroyed", False)])
def test_a_deployment_bills_in_live_states_but_stopped(status, bills):
    deployment = Deployment.from_json(record(status=status, cost_hr=2.0))
    assert deployment.bills is bills and deployment.burn_hr == (2.0 if bills else 0.0)


def test_live_burn_sums_what_bills():
    deps = [Deployment.from_json(record(id=f"d{n}", status=s, cost_hr=c))
            for n, (s, c) in enumerate([("running", 1.0), ("stopped", 5.0), ("destroyed", 9.0), ("ready", 0.25)])]
    assert live_burn(deps) == (1.25, 2)


def test_the_shutdown_deadline_is_the_earlier_of_deadline_and_max_hours():
    both = Deployment.from_json(record(shutdown_rule={"max_hours": 2, "deadline": "2026-11-30T21:00:00Z"}))
    assert both.shutdown_deadline == datetime(2026, 11, 30, 21, 0, tzinfo=UTC)
    hours = Deployment.from_json(record(shutdown_rule={"max_hours": 0.5, "deadline": "2026-11-30T21:00:00Z"}))
    assert hours.shutdown_deadline == datetime(2026, 11, 30, 20, 30, tzinfo=UTC)
    assert Deployment.from_json(record(shutdown_rule={"idle_minutes": 10})).shutdown_deadline is None
    assert Deployment.from_json(record()).shutdown_deadline is None


def test_a_typed_ssh_block_is_written_with_only_what_is_set(registry):
    saved = registry.update_deployment("dep_b", ssh=SshAccess(host="h", port=2200))
    assert saved.ssh == SshAccess(host="h", port=2200)
    written = json.loads(registry.path("deployments.json").read_text())["deployments"][1]
    assert written["ssh"] == {"host": "h", "port": 2200}


def test_the_audit_reads_a_malformed_field_as_missing_and_judges_the_rest():
    found = Deployment.as_found({"id": "dep_x", "provider": "vast", "status": "running", "cost_hr": "0.4",
                                 "created_at": "2026-11-30T20:00:00Z", "ssh": {"port": "22"}, "owner": "ops"})
    assert (found.cost_hr, found.ssh, found.owner, found.bills) == (0.0, None, "ops", True)
    assert "cost_hr" not in found.written and "owner" in found.written
    missing = Deployment.as_found({"status": 7})
    assert (missing.id, missing.status, missing.written) == ("None", "7", frozenset())
