"""The ready gate, the only path to `ready`: the ready decision applied to a deployment through the lifecycle
(a failure is recorded and a second one is `error`), with one line saying what it did."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from gpuharness.core import lifecycle
from gpuharness.core.clock import now_ts
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.secrets import clip
from gpuharness.health.checks_table import HEALTH_CHECKS, HealthChecks
from gpuharness.health.readiness import CheckResult, Verdict, decide

#: The statuses the gate moves on; a deployment in any other status is checked and left as it is.
AWAITING: Final = frozenset({"health-checking"})
FAILURES_TO_ERROR: Final = 2


@final
@dataclass(frozen=True, slots=True)
class RunEvidence:
    """What the run offers as evidence: the probe's digest and route, the report of the run, and the GPU's figures
    against its class (gpu.performance.evidence)."""

    probe_digest: str | None = None
    route: str | None = None
    report: str | None = None
    performance: dict[str, Any] | None = None


def gate_command(deployment_id: str) -> str:
    """The command that proves a deployment and moves it through the gate: live, since an offline replay (the
    default mode) changes nothing."""
    return f"pytest checks/health --gpu-mode live --deployment {deployment_id}"


def offline_verdict(deployment_id: str, results: Mapping[str, CheckResult],
                    table: HealthChecks = HEALTH_CHECKS) -> str:
    """A replay proves the checks, not the host as it is now: it says what the gate would do and changes nothing."""
    failed = decide(results, table, serverless=False).failed_checks
    verdict = f"would fail ({', '.join(failed)})" if failed else "checks pass on the recording"
    return f"{deployment_id}: offline replay: {verdict}; status unchanged (run with --gpu-mode live to gate it)"


def conclude(registry: Registry, deployment_id: str, results: Mapping[str, CheckResult], evidence: RunEvidence,
             table: HealthChecks = HEALTH_CHECKS) -> str:
    """Decide on a deployment's results and apply the decision through the lifecycle; the line to report."""
    try:
        deployment = registry.deployment(deployment_id)
        decision = decide(results, table, serverless=deployment.is_serverless)
        status = deployment.status
        if status in ("error", "stopped") and not deployment.never_came_up and decision.verdict is Verdict.READY:
            # the same health run that gates a new deployment brings one back from error (a bad input, a fixed host)
            lifecycle.transition(registry, deployment_id, "health-checking", route=evidence.route,
                                 note="health run on a deployment in error: every check passes",
                                 next_action=gate_command(deployment_id))
            return _mark_ready(registry, deployment_id, results, evidence, table)
        if status not in AWAITING:
            verdict = "failed" if decision.failures else "passed"
            way_on = (f"fix what the failed checks name, or `gpuharness destroy {deployment_id} --confirm "
                      f"{deployment_id}`" if status in ("error", "stopped") and not deployment.never_came_up
                      else next_step(deployment))
            return (f"{deployment_id}: health {verdict}; status {status} left as is (only health-checking "
                    f"deployments are gated, and error or stopped ones that pass); next: {way_on}")
        if decision.verdict is Verdict.NOT_JUDGED and decision.decisive is not None:
            name, result = decision.decisive
            return (f"{deployment_id}: NOT judged: {name}: {result.cause} (a recording, route, verified host key or "
                    "readable manifest is missing: not a deployment failure); status left health-checking")
        if decision.verdict is Verdict.FAILED and decision.decisive is not None:
            return _record_failure(registry, deployment, decision.decisive, decision.failed_checks, evidence)
        if decision.verdict is Verdict.INCOMPLETE:
            why = "; ".join(part for part in (
                f"checks not run: {', '.join(decision.missing)}" if decision.missing else "",
                f"skipped: {', '.join(decision.blocked)}" if decision.blocked else "") if part)
            return f"{deployment_id}: NOT ready ({why}); status left health-checking"
        return _mark_ready(registry, deployment_id, results, evidence, table)
    except UserError as exc:
        return f"{deployment_id}: not changed: {exc.line()}"


#: The way on from each state of a deployment that came up (see next_step).
_WAY_ON: Final = {
    "provisioning": "`gpuharness install {id}`",
    "installing": "`gpuharness install {id}` (an install cut short starts over)",
    "configuring": "`gpuharness configure {id}`",
    "ready": "`gpuharness run {id} --inputs JSON`",
    "running": ("wait for the job it runs (its ledger line shows it); a job whose run process died is marked "
                "interrupted by the next run on it"),
    "retrieving": "`gpuharness retrieve {id} --to outputs` (a retrieval cut short carries on)",
    "stopped": ("start it at its provider (a passing health run then brings it back to ready), or "
                "`gpuharness destroy {id} --confirm {id}`"),
    "destroying": "`gpuharness destroy {id} --confirm {id}` (a destroy cut short carries on)",
    "error": ("`{gate}` (a passing run brings it back to ready), or `gpuharness destroy {id} --confirm {id}`"),
    "destroyed": "nothing: it is kept as history; `gpuharness provision` a new one",
}


def next_step(deployment: Deployment) -> str:
    """The command that moves a deployment on from its state: never the one that just refused it, never an edit
    of a state file. One whose instance never came up is resumed or destroyed."""
    if deployment.never_came_up:
        return lifecycle.resume_or_destroy(deployment.id)
    gate = gate_command(deployment.id)
    way = _WAY_ON.get(deployment.status, f"`{gate}`")
    return way.format(id=deployment.id, gate=gate)


def _record_failure(registry: Registry, deployment: Deployment, decisive: tuple[str, CheckResult],
                    failed_checks: list[str], evidence: RunEvidence) -> str:
    name, result = decisive
    count = int((deployment.health or {}).get("failures", 0)) + 1
    health = {"status": "failed", "failed_at": now_ts(), "check": name, "cause": result.cause or name,
              "message": clip(result.message, 500), "failures": count, "failed_checks": failed_checks,
              "probe_digest": evidence.probe_digest, "report": evidence.report, **_figures(evidence)}
    target = "error" if count >= FAILURES_TO_ERROR else "health-checking"
    extra: dict[str, Any] = {"health": health}
    if target == "error":
        extra["error"] = f"health failed twice: {health['cause']}: {clip(result.message, 200)}"
    lifecycle.transition(registry, deployment.id, target, route=evidence.route, marker=evidence.probe_digest,
                         note=f"health: {name} failed ({health['cause']})",
                         next_action="investigate, fix, re-run checks/health" if target != "error"
                         else "destroy or rebuild: failed health twice", **extra)
    return f"{deployment.id}: NOT ready: {name} failed ({health['cause']}); status {target} (failure {count})"


def _mark_ready(registry: Registry, deployment_id: str, results: Mapping[str, CheckResult], evidence: RunEvidence,
                table: HealthChecks) -> str:
    passed_at = now_ts()
    health = {"status": "passed", "passed_at": passed_at, "report": evidence.report,
              "probe_digest": evidence.probe_digest, "route": evidence.route,
              "checks": {name: results[name].outcome for name in table.ids()}, "failures": 0, **_figures(evidence)}
    lifecycle.transition(registry, deployment_id, "ready", route=evidence.route, marker=evidence.probe_digest,
                         note="health: every check passed, test generation included", next_action="run jobs",
                         ready_at=passed_at, health=health)
    return f"{deployment_id}: READY (probe {(evidence.probe_digest or '?')[:19]})"


def _figures(evidence: RunEvidence) -> dict[str, Any]:
    """The GPU's figures for the health record (read back by `gpuharness gpus --history`), where they were taken."""
    return {"performance": evidence.performance} if evidence.performance is not None else {}
