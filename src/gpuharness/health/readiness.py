"""The ready decision: a pure function of one deployment's collected check results and the health table."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Final, Literal, final

from gpuharness.health.checks_table import HealthChecks

CheckOutcome = Literal["passed", "failed", "skipped"]

#: Failures of the harness's inputs (no recording, no route, a key never verified), not of the deployment:
#: reported, never counted.
NOT_JUDGED: Final = frozenset({"no_transcript", "bad_transcript", "no_recording", "no_route", "host_key_unknown",
                               "bad_manifest"})


@final
@dataclass(frozen=True, slots=True)
class CheckResult:
    """How one check of one deployment ended in this run; `cause` classifies a failure."""

    outcome: CheckOutcome
    message: str = ""
    cause: str | None = None


class Verdict(Enum):
    READY = "ready"
    FAILED = "failed"  # a counted failure: the deployment stays health-checking, a second one is error
    NOT_JUDGED = "not judged"  # a NOT_JUDGED cause: the harness's input is missing, not the deployment's health
    INCOMPLETE = "incomplete"  # checks not run, or skipped where a skip blocks ready


@final
@dataclass(frozen=True, slots=True)
class Decision:
    """The verdict, the failures in table order, and `decisive`: the failure the verdict names."""

    verdict: Verdict
    failures: tuple[tuple[str, CheckResult], ...] = ()
    decisive: tuple[str, CheckResult] | None = None
    missing: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()

    @property
    def failed_checks(self) -> list[str]:
        return [name for name, _ in self.failures]


def decide(results: Mapping[str, CheckResult], table: HealthChecks, *, serverless: bool) -> Decision:
    """Every check of the table passed (a `may_skip` one may skip; for a serverless endpoint, every check but the
    serverless ones may skip) -> READY. A failure -> FAILED, unless a failure's cause is NOT_JUDGED."""
    required = table.ids()
    failures = tuple((name, results[name]) for name in required
                     if name in results and results[name].outcome == "failed")
    missing = tuple(name for name in required if name not in results)
    allowed = table.may_skip() | (frozenset(required) - table.serverless() if serverless else frozenset())
    blocked = tuple(name for name, result in results.items() if result.outcome == "skipped" and name not in allowed)
    unjudged = [(name, result) for name, result in failures if result.cause in NOT_JUDGED]
    if unjudged:
        return Decision(Verdict.NOT_JUDGED, failures, unjudged[0], missing, blocked)
    if failures:
        return Decision(Verdict.FAILED, failures, failures[0], missing, blocked)
    if missing or blocked:
        return Decision(Verdict.INCOMPLETE, failures, None, missing, blocked)
    return Decision(Verdict.READY)
