"""The ready decision, a pure function of the collected results and the health table, and the gate that applies
it through the lifecycle (the pytester runs of the whole suite are in test_ready_gate.py)."""

from __future__ import annotations

import copy

import pytest

from gpuharness.core.lifecycle import read_journal
from gpuharness.core.registry import Registry
from gpuharness.core.rules import Rule
from gpuharness.health import gate
from gpuharness.health.checks_table import HEALTH_CHECKS, HealthCheck, HealthChecks
from gpuharness.health.readiness import CheckResult, Verdict, decide

PASSED = CheckResult("passed")


def all_passed(**changes: CheckResult) -> dict[str, CheckResult]:
    results = {name: PASSED for name in HEALTH_CHECKS.ids()}
    results.update(changes)
    return results


def test_every_check_passed_is_ready():
    assert decide(all_passed(), HEALTH_CHECKS, serverless=False).verdict is Verdict.READY


def test_a_check_that_may_skip_does_not_block_ready():
    results = all_passed(cuda_smoke_test=CheckResult("skipped", "torch is not installed"),
                         job_progress_advanced=CheckResult("skipped", "no job running"))
    assert decide(results, HEALTH_CHECKS, serverless=False).verdict is Verdict.READY


def test_a_skipped_required_check_blocks_ready():
    decision = decide(all_passed(gpu_matches_order=CheckResult("skipped", "no probe")), HEALTH_CHECKS,
                      serverless=False)
    assert (decision.verdict, decision.blocked) == (Verdict.INCOMPLETE, ("gpu_matches_order",))


def test_checks_not_run_block_ready_and_are_named_in_table_order():
    results = all_passed()
    del results["service_health_endpoint"], results["host_reachable"]
    decision = decide(results, HEALTH_CHECKS, serverless=False)
    assert (decision.verdict, decision.missing) == (Verdict.INCOMPLETE, ("host_reachable", "service_health_endpoint"))


def test_the_first_failure_in_table_order_is_decisive_whatever_order_the_results_came_in():
    hot = CheckResult("failed", "GPU 0 is at 95 C", "overheating")
    wrong = CheckResult("failed", "ordered H100", "gpu_model")
    results = {"temperature_under_limit": hot, **all_passed(temperature_under_limit=hot, gpu_matches_order=wrong)}
    decision = decide(results, HEALTH_CHECKS, serverless=False)
    assert decision.verdict is Verdict.FAILED
    assert decision.decisive == ("gpu_matches_order", wrong)
    assert decision.failed_checks == ["gpu_matches_order", "temperature_under_limit"]


@pytest.mark.parametrize("cause", ["no_transcript", "no_recording", "no_route", "host_key_unknown"])
def test_a_missing_input_is_not_judged_even_beside_a_real_failure(cause):
    results = all_passed(host_reachable=CheckResult("failed", "hot", "overheating"),
                         test_generation_succeeds=CheckResult("failed", "no recorded interaction", cause))
    decision = decide(results, HEALTH_CHECKS, serverless=False)
    assert decision.verdict is Verdict.NOT_JUDGED
    assert decision.decisive is not None and decision.decisive[0] == "test_generation_succeeds"


def test_a_serverless_endpoint_is_judged_on_its_serverless_checks_only():
    skipped = {name: CheckResult("skipped", "no host") for name in HEALTH_CHECKS.ids()
               if name not in HEALTH_CHECKS.serverless()}
    assert decide(all_passed(**skipped), HEALTH_CHECKS, serverless=True).verdict is Verdict.READY
    assert decide(all_passed(**skipped), HEALTH_CHECKS, serverless=False).verdict is Verdict.INCOMPLETE
    no_job = all_passed(**skipped, test_generation_succeeds=CheckResult("skipped", "?"))
    assert decide(no_job, HEALTH_CHECKS, serverless=True).blocked == ("test_generation_succeeds",)


def test_the_required_checks_are_the_tables():
    table = HealthChecks([HealthCheck(Rule("host_reachable", "reachable", ("route",))),
                          HealthCheck(Rule("gpu_ok", "GPU", ("probe.gpus",)), may_skip=True)])
    assert decide({"host_reachable": PASSED}, table, serverless=False).missing == ("gpu_ok",)
    assert decide({"host_reachable": PASSED, "gpu_ok": CheckResult("skipped")}, table,
                  serverless=False).verdict is Verdict.READY
    assert decide({"host_reachable": PASSED}, HEALTH_CHECKS, serverless=False).verdict is Verdict.INCOMPLETE


def test_the_decision_reads_its_inputs_and_changes_nothing():
    results = all_passed(no_uncorrected_ecc=CheckResult("failed", "ECC", "ecc_uncorrected"))
    before = copy.deepcopy(results)
    first = decide(results, HEALTH_CHECKS, serverless=False)
    assert decide(results, HEALTH_CHECKS, serverless=False) == first
    assert results == before


@pytest.fixture
def awaiting(registry: Registry, deployment_item) -> Registry:
    with registry.update("deployments.json") as doc:
        doc["deployments"].append(deployment_item("dep_h", "health-checking"))
    return registry


EVIDENCE = gate.RunEvidence(probe_digest="sha256:" + "a" * 64, route="root@127.0.0.1:2222", report="/r.html")


def test_the_gate_marks_ready_with_the_evidence_and_journals_it(awaiting):
    line = gate.conclude(awaiting, "dep_h", all_passed(), EVIDENCE)
    assert line == "dep_h: READY (probe sha256:aaaaaaaaaaaa)"
    deployment = awaiting.deployment("dep_h").to_json()
    assert deployment["status"] == "ready" and deployment["ready_at"] == deployment["health"]["passed_at"]
    assert deployment["health"]["checks"] == {name: "passed" for name in HEALTH_CHECKS.ids()}
    moves = [e for e in read_journal(awaiting.journal_path) if e["deployment"] == "dep_h"]
    assert [(e["from"], e["to"], e["marker"]) for e in moves] == [("health-checking", "ready", EVIDENCE.probe_digest)]


def test_the_gate_records_a_failure_and_a_second_one_is_error(awaiting):
    results = all_passed(temperature_under_limit=CheckResult("failed", "dep_h: GPU 0 is at 95 C", "overheating"))
    first = gate.conclude(awaiting, "dep_h", results, EVIDENCE)
    assert first == "dep_h: NOT ready: temperature_under_limit failed (overheating); status health-checking (failure 1)"
    second = gate.conclude(awaiting, "dep_h", results, EVIDENCE)
    assert second.endswith("status error (failure 2)")
    deployment = awaiting.deployment("dep_h").to_json()
    assert deployment["error"] == "health failed twice: overheating: dep_h: GPU 0 is at 95 C"


def test_the_gate_leaves_a_deployment_outside_health_checking_as_it_is(registry):
    dep_id = registry.deployments()[0].id
    line = gate.conclude(registry, dep_id, all_passed(gpu_matches_order=CheckResult("failed", "x", "gpu_model")),
                         EVIDENCE)
    assert "health failed; status ready left as is" in line
    assert list(read_journal(registry.journal_path)) == []


def test_an_offline_replay_says_what_the_gate_would_do(awaiting):
    failing = all_passed(disk_has_room_for_model=CheckResult("failed", "full", "disk_full"))
    assert gate.offline_verdict("dep_h", failing) == (
        "dep_h: offline replay: would fail (disk_has_room_for_model); status unchanged (run with --gpu-mode live to "
        "gate it)")
    assert awaiting.deployment("dep_h").to_json()["status"] == "health-checking"


def test_an_unknown_deployment_is_reported_not_raised(awaiting):
    assert gate.conclude(awaiting, "dep_gone", all_passed(), EVIDENCE).startswith("dep_gone: not changed: ")
