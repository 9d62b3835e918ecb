"""Reconcile: one list call per provider, machines.json, journal, orphans, vanished deployments, stale jobs."""

from __future__ import annotations

import subprocess
import sys

from reconcile_fakes import FakeProvider, deployment, instance, make_registry

from gpuharness.core import lifecycle
from gpuharness.core.ledger import Ledger
from gpuharness.operations.reconcile import find_orphans, reconcile, stale_running_jobs
from gpuharness.providers.inventory import fetch_inventory


def _inventory(*providers: FakeProvider):
    return fetch_inventory({p.name: p for p in providers}, clock=lambda: "2026-11-30T21:00:00.000Z")


def test_reconcile_makes_one_list_call_per_provider_and_no_gets_for_1000_deployments(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", f"p{n}") for n in range(1000)])
    vast = FakeProvider("vast", [instance("vast", "v1")])
    registry = make_registry(tmp_path, [deployment(f"d{n}", "runpod", f"p{n}") for n in range(1000)],
                             ("runpod", "vast"))
    report = reconcile(registry, _inventory(runpod, vast))
    assert runpod.calls == {"list": 1} and vast.calls == {"list": 1}
    assert [o.instance_id for o in report.orphans] == ["v1"]
    assert not report.vanished
    assert len(registry.items("machines.json")) == 1001


def test_orphan_is_a_prefixed_instance_no_deployment_claims(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", "a"), instance("runpod", "b"),
                                     instance("runpod", "mine", name="someone-elses"),
                                     instance("runpod", "dead", status="terminated")])
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a")])
    orphans = reconcile(registry, _inventory(runpod)).orphans
    assert [o.instance_id for o in orphans] == ["b"]
    assert "orphan runpod/b" in orphans[0].message()
    assert "$0.69/hr" in orphans[0].message()


def test_instance_claimed_by_idempotency_key_is_not_an_orphan(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", "x", name="gh-key-1")])
    deps = [deployment("d1", "runpod", None, status="provisioning", idempotency_key="gh-key-1")]
    inventory = _inventory(runpod)
    assert find_orphans(deps, inventory) == []


def test_destroyed_deployment_whose_instance_still_runs_is_an_orphan(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", "a")])
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a", status="destroyed")])
    orphans = reconcile(registry, _inventory(runpod)).orphans
    assert orphans and orphans[0].claimed_by == "d1"
    assert "destroyed in the registry" in orphans[0].message()


def test_vanished_deployment_moves_to_error_and_the_change_is_journaled(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", "b", status="terminated")])
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a"), deployment("d2", "runpod", "b"),
                                        deployment("d3", "runpod", "c", status="destroying")])
    report = reconcile(registry, _inventory(runpod))
    assert sorted(v.deployment_id for v in report.vanished) == ["d1", "d2"]
    assert {d.id: d.status for d in registry.deployments()} == {"d1": "error", "d2": "error",
                                                                      "d3": "destroying"}
    journal = list(lifecycle.read_journal(registry.journal_path))
    assert [(j["deployment"], j["from"], j["to"]) for j in journal] == [("d1", "ready", "error"),
                                                                        ("d2", "ready", "error")]
    assert "no longer lists it" in registry.deployment("d1").error
    assert "reports it terminated" in registry.deployment("d2").error


def test_deployment_of_an_unlisted_provider_is_not_judged(tmp_path):
    registry = make_registry(tmp_path, [deployment("d1", "vast", "v9")], ("runpod", "vast"))
    report = reconcile(registry, _inventory(FakeProvider("runpod")))
    assert report.vanished == []


def test_machines_json_marks_an_unlisted_instance_vanished_and_journals_status_moves(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", "a", status="pending"), instance("runpod", "b")])
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a", status="provisioning")])
    reconcile(registry, _inventory(runpod))
    runpod.instances["a"] = instance("runpod", "a", status="running")
    del runpod.instances["b"]
    report = reconcile(registry, _inventory(runpod))
    machines = {m["instance_id"]: m for m in registry.items("machines.json")}
    assert machines["a"]["status"] == "running" and not machines["a"].get("vanished")
    assert machines["b"]["vanished"] is True
    assert "runpod/b no longer listed" in report.machine_changes
    journal = list(lifecycle.read_journal(registry.journal_path))
    assert journal[-1]["marker"] == {"reconcile": "pending -> running"}
    assert journal[-1]["from"] == journal[-1]["to"] == "provisioning"


def test_provider_stopped_instance_moves_a_ready_deployment_to_stopped(tmp_path):
    runpod = FakeProvider("runpod", [instance("runpod", "a")])
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a")])
    reconcile(registry, _inventory(runpod))
    runpod.instances["a"] = instance("runpod", "a", status="stopped")
    report = reconcile(registry, _inventory(runpod))
    assert report.transitions == ["d1 ready -> stopped"]
    assert registry.deployment("d1").status == "stopped"


def test_stale_running_jobs_lists_dead_runner_and_gone_deployment(tmp_path):
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a"), deployment("d2", "runpod", "b",
                                                                                    status="destroyed")])
    ledger = Ledger(registry.ledger_path)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    base = {"provider": "runpod", "started_at": "2026-11-30T20:00:00Z"}
    ledger.append({"id": "J-1", "deployment_id": "d1", "status": "running", "pid": dead.pid, **base})
    ledger.append({"id": "J-2", "deployment_id": "d2", "status": "running", **base})
    ledger.append({"id": "J-3", "deployment_id": "d1", "status": "running", "pid": 1, **base})
    ledger.append({"id": "J-4", "deployment_id": "d1", "status": "completed", "pid": dead.pid, **base})
    stale = stale_running_jobs(ledger, registry.deployments())
    assert {s.job_id: s.reason for s in stale} == {
        "J-1": f"its runner process {dead.pid} on {__import__('socket').gethostname()} is gone",
        "J-2": "deployment d2 is destroyed"}


def test_a_provisioning_deployment_whose_instance_is_not_listed_is_flagged_but_left_to_its_launcher(tmp_path):
    registry = make_registry(tmp_path, [deployment("d1", "runpod", "a", status="provisioning")])
    report = reconcile(registry, _inventory(FakeProvider("runpod")))
    assert [v.deployment_id for v in report.vanished] == ["d1"]
    assert report.transitions == []
    assert registry.deployment("d1").status == "provisioning"


def test_a_second_instance_with_a_live_deployments_key_is_a_billing_orphan(tmp_path):
    """Two launches with one key (a race): the deployment records one; the other bills and is reported."""
    runpod = FakeProvider("runpod", [instance("runpod", "first", name="gh-dep_same"),
                                     instance("runpod", "second", name="gh-dep_same")])
    registry = make_registry(tmp_path, [deployment("dep_same", "runpod", "first", idempotency_key="gh-dep_same")])
    report = reconcile(registry, _inventory(runpod))
    assert [(o.instance_id, o.duplicate_of) for o in report.orphans] == [("second", "dep_same")]
    assert "duplicate launch, billing" in report.orphans[0].message()
    assert not report.clean
