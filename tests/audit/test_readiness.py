"""Discipline rule 1 as the audit reads it: ready only after a passed test generation, with evidence."""

from gpuharness.audit.readiness import readiness_problems
from gpuharness.core.deployment import Deployment

GATE_EVIDENCE = {"status": "passed", "passed_at": "2026-11-30T10:00:00.000Z",
                 "checks": {"test_generation_succeeds": "passed"}}


def ready(**fields):
    return Deployment.as_found({"id": "dep_a", "status": "ready", "ready_at": "2026-11-30T10:00:01.000Z",
                                "health": GATE_EVIDENCE, **fields})


def test_gate_evidence_and_a_first_ready_from_health_checking_pass():
    assert readiness_problems(ready(), [(3, "health-checking"), (9, "running"), (12, "retrieving")]) == []


def test_hand_kept_evidence_is_accepted():
    health = {"test_generation": "passed", "at": "2026-11-30T09:59:00.000Z"}
    assert readiness_problems(ready(health=health), [(3, "health-checking")]) == []


def test_never_ready_deployment_needs_no_evidence():
    assert readiness_problems(Deployment.as_found({"id": "dep_b", "status": "health-checking"}), []) == []


def test_failed_test_generation_is_not_evidence():
    health = {"status": "failed", "checks": {"test_generation_succeeds": "failed"}}
    [(where, message)] = readiness_problems(ready(health=health), [(3, "health-checking")])
    assert where == "deployment dep_a" and "without health evidence of a passed test generation" in message


def test_running_without_ready_at_is_flagged():
    problems = readiness_problems(ready(status="running", ready_at=None), [])
    assert any("no ready_at" in message for _, message in problems)


def test_first_ready_from_running_is_flagged_with_its_journal_line():
    [(where, message)] = readiness_problems(ready(), [(4, "running")])
    assert where == "transitions.jsonl:4" and "(its first ready)" in message
