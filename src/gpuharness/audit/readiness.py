"""Discipline rule 1: a deployment is `ready` only after its test generation succeeded, with the evidence recorded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuharness.core.clock import parse_ts
from gpuharness.core.deployment import Deployment

#: statuses only reachable through `ready` (ready ⇄ running, retrieving)
SERVING = frozenset({"ready", "running", "retrieving"})
#: states a deployment may enter `ready` from; a first `ready` must come from health-checking
BACK_TO_READY = frozenset({"running", "retrieving"})


def test_generation_passed(health: Mapping[str, Any]) -> bool:
    """Health evidence of a passed test generation, as the ready gate writes it or as a person records it."""
    checks = health.get("checks")
    if isinstance(checks, Mapping) and checks.get("test_generation_succeeds") == "passed":
        return True
    return health.get("test_generation") == "passed"


def evidence_time(health: Mapping[str, Any]) -> str | None:
    """When the evidence was taken (the gate's passed_at, or a hand-kept `at`)."""
    moment = health.get("passed_at") or health.get("at")
    return str(moment) if moment else None


def readiness_problems(deployment: Deployment,
                       entries: Sequence[tuple[int, str | None]]) -> list[tuple[str, str]]:
    """(where, message) for each breach of rule 1 by this deployment; entries are its journal transitions into
    `ready` as (line number, from state)."""
    dep, status, ready_at = deployment.id, deployment.status, deployment.ready_at
    became_ready = bool(ready_at) or status in SERVING or bool(entries)
    if not became_ready:
        return []
    problems: list[tuple[str, str]] = []
    fix = ("run `pytest checks/health --gpu-mode live --deployment " + dep + "`: only its ready gate may set ready")
    health = deployment.health
    if not ready_at:
        problems.append((f"deployment {dep}",
                         f"status {status} but no ready_at: it never passed the ready gate; {fix}"))
    if not isinstance(health, Mapping) or not test_generation_passed(health):
        problems.append((f"deployment {dep}", "was ready without health evidence of a passed test generation "
                         f"(health.checks.test_generation_succeeds or health.test_generation = \"passed\"); {fix}"))
    else:
        taken = evidence_time(health)
        if taken and ready_at and parse_ts(taken) > parse_ts(str(ready_at)):
            problems.append((f"deployment {dep}", f"health evidence taken at {taken}, after ready_at {ready_at}: "
                             f"ready came before its proof; {fix}"))
    seen_ready = False
    for lineno, source in entries:
        if source == "health-checking" or (seen_ready and source in BACK_TO_READY):
            seen_ready = True
            continue
        problems.append((f"transitions.jsonl:{lineno}", f"deployment {dep} entered ready from {source}, not from "
                         f"health-checking{' (its first ready)' if not seen_ready else ''}; {fix}"))
        seen_ready = True
    return problems
