"""run: one job on a ready deployment, with ledger lines, the per-job ceiling, classification and one retry."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, final

from gpuharness.audit.billed import billed_so_far
from gpuharness.core import claims
from gpuharness.core.clock import format_ts
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import transition
from gpuharness.core.policy import Policy, exceeds
from gpuharness.core.registry import Registry
from gpuharness.core.reservations import Expected, expected_cost, reserved
from gpuharness.health.gate import next_step
from gpuharness.operations.context import Context
from gpuharness.operations.failure import Failure, classify, refusal
from gpuharness.operations.install import workflow_manifest
from gpuharness.operations.job_inputs import check_inputs
from gpuharness.remote import Remote

JobState = Literal["running", "completed", "failed"]
PROGRESS_EVERY_S = 30.0


@final
@dataclass(frozen=True, slots=True)
class JobProgress:
    """What the runtime says about a submitted job. outputs: name, remote_path, and sha256/size if known."""

    state: JobState
    outputs: tuple[dict[str, Any], ...] = ()
    log: str = ""
    marker: Any = None


class JobExecutor(Protocol):
    """The runtime seam for jobs (ComfyUI, OpenAI-compatible, serverless, native)."""

    def submit(self, workflow: dict[str, Any], inputs: dict[str, Any], job_id: str) -> str:
        """Start the job; return the runtime's handle (prompt id, job id)."""
        ...

    def poll(self, handle: str) -> JobProgress: ...

    def cancel(self, handle: str) -> None: ...

    def close(self) -> None: ...


@final
@dataclass(frozen=True, slots=True)
class ExecutorSeams:
    """What a runtime's executor module (the runtime table's `executor`) builds its executor from, in its
    `build(deployment, seams)`: the registry (the provider's entry), how to reach a deployment's host, and the
    environment an endpoint's key comes from."""

    registry: Registry
    connect: Callable[[Deployment], Remote]
    env: Mapping[str, str] | None = None


@final
@dataclass(slots=True)
class JobResult:
    job_id: str
    status: str
    cost_usd: float
    duration_s: float
    attempts: int
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    failure: Failure | None = None
    lines: list[dict[str, Any]] = field(default_factory=list)


@contextlib.contextmanager
def run_lock(ctx: Context, deployment_id: str) -> Iterator[None]:
    """Held while a `gpuharness run` works on a deployment (its `run` claim); the kernel releases it if the
    process dies."""
    with claims.claimed(ctx.registry.root, "run", deployment_id,
                        busy=f"another `gpuharness run` is working on {deployment_id}",
                        hint="wait for it; jobs on one deployment run one at a time"):
        yield


def lock_is_free(ctx: Context, deployment_id: str) -> bool:
    """True when no live process holds the deployment's run claim."""
    return claims.is_free(ctx.registry.root, "run", deployment_id)


def mark_interrupted(ctx: Context, deployment_id: str | None = None) -> list[str]:
    """Jobs left `running` by a run process that died: append an `interrupted` line (a new line; running is
    not terminal, so no rewrite and no correction), and bring the deployment back from `running`."""
    ledger = Ledger(ctx.registry.ledger_path, clock=ctx.clock)
    marked: list[str] = []
    stale: dict[str, list[dict[str, Any]]] = {}
    for record in ledger.current(status="running").values():
        if deployment_id is None or record["deployment_id"] == deployment_id:
            stale.setdefault(record["deployment_id"], []).append(record)
    for dep_id, records in stale.items():
        if not lock_is_free(ctx, dep_id):
            continue
        for record in records:
            line = {k: v for k, v in record.items() if k not in ("ts", "correction", "reason")}
            line.update(status="interrupted", completed_at=None, ts=ctx.now(),
                        error="the `gpuharness run` process died while this job was running; "
                              "outputs, if any, stay on the host until retrieved")
            ledger.append(line, check_sequence=True)
            marked.append(record["id"])
        with contextlib.suppress(UserError):
            if ctx.registry.deployment(dep_id).status == "running":
                transition(ctx.registry, dep_id, "ready", note=f"run process died; interrupted {len(records)} job(s)",
                           next_action=f"gpuharness retrieve {dep_id}")
    _settle_jobless(ctx, deployment_id, set(stale))
    return marked


def _settle_jobless(ctx: Context, deployment_id: str | None, settled: set[str]) -> None:
    """A deployment left `running` with no job line running on it (its run process died before writing one) and
    no live run: back to ready, journaled."""
    for deployment in ctx.registry.deployments():
        if deployment.status != "running" or deployment.id in settled or deployment_id not in (None, deployment.id):
            continue
        if lock_is_free(ctx, deployment.id):
            with contextlib.suppress(UserError):
                transition(ctx.registry, deployment.id, "ready", note="left running with no job running on it: its "
                           "run process died before the job's first line", next_action="run jobs")


def next_job_id(ledger: Ledger) -> str:
    """J-000123: one more than the largest numbered id in the ledger."""
    highest = 0
    for line in ledger.lines():
        tail = line.id.removeprefix("J-")
        if tail.isdigit():
            highest = max(highest, int(tail))
    return f"J-{highest + 1:06d}"


def spend_line(ctx: Context) -> str:
    """Spend so far against the ceilings, shown before a batch (refused without policy.json)."""
    policy = Policy(ctx.registry.spending_policy())
    day, month = billed_so_far(ctx.registry, ctx.now())

    def cap(value: float | None) -> str:
        return "none" if value is None else f"${value:,.2f}"

    ceilings = policy.ceilings
    return (f"spend so far: today ${day:,.4f} of daily_usd {cap(ceilings.daily_usd)}; this month ${month:,.4f} of "
            f"monthly_usd {cap(ceilings.monthly_usd)}; per job ceiling per_job_usd {cap(ceilings.per_job_usd)}")


def _cost(duration_s: float, cost_hr: float) -> float:
    return round(duration_s * cost_hr / 3600.0, 6)


@final
@dataclass(slots=True)
class Chain:
    """A job and its retries: one budget. Each retry is a new job id carrying retry_of (the first id), and the
    per-job ceiling covers what every attempt of the chain cost."""

    first: str | None = None
    spent_usd: float = 0.0
    attempt: int = 0

    def add(self, line: dict[str, Any]) -> None:
        self.first = self.first or str(line["id"])
        self.spent_usd += float(line.get("cost_usd") or 0.0)


def _attempt(ctx: Context, executor: JobExecutor, deployment: Deployment, workflow: dict[str, Any],
             inputs: dict[str, Any], job_id: str, chain: Chain, *, per_job_usd: float | None, poll_s: float,
             deadline_s: float) -> tuple[dict[str, Any], Failure | None]:
    ledger = Ledger(ctx.registry.ledger_path, clock=ctx.clock)
    cost_hr = deployment.cost_hr
    start = ctx.clock()
    base: dict[str, Any] = {
        "id": job_id, "deployment_id": deployment.id, "provider": deployment.provider,
        "model": deployment.model, "workflow": workflow["id"], "workflow_version": int(workflow["version"]),
        "inputs": inputs, "started_at": format_ts(start), "gpu": deployment.gpu, "attempt": chain.attempt,
        "pid": os.getpid(), "host": socket.gethostname(),  # so reconcile can tell a dead runner
        **({"retry_of": chain.first} if chain.first else {}),
    }
    ledger.append({**base, "status": "running", "ts": format_ts(start)}, check_sequence=True)
    ctx.say(f"{job_id}: running on {deployment.id} (attempt {chain.attempt}, ${cost_hr:.3f}/hr)")

    def finish(status: str, **extra: Any) -> dict[str, Any]:
        end = ctx.clock()
        duration = max((end - start).total_seconds(), 0.0)
        line = {**base, "status": status, "completed_at": format_ts(end), "duration_s": round(duration, 3),
                "cost_usd": _cost(duration, cost_hr), "ts": format_ts(end), **extra}
        ledger.append(line, check_sequence=True)
        return line

    try:
        handle = executor.submit(workflow, inputs, job_id)
    except Exception as exc:  # the runtime refused the job: record it honestly, then classify
        failure = refusal(exc)
        return finish("failed", error=failure.message(), cause=failure.cause, artifacts=[]), failure
    next_report = PROGRESS_EVERY_S
    while True:
        try:
            progress = executor.poll(handle)
        except Exception as exc:  # the runtime stopped answering: the job's fate is unknown, record it failed
            # never retried: the first job may still be running on the host, and a second would double the bill
            seen = classify(f"lost contact with the runtime while polling: {exc}")
            failure = Failure(seen.cause, seen.line, "check the runtime (pytest checks/health) before running "
                              "again; the job may still be running on the host", False)
            return finish("failed", error=failure.message(), cause=failure.cause, artifacts=[]), failure
        elapsed = (ctx.clock() - start).total_seconds()
        if progress.state == "completed":
            artifacts = [{k: v for k, v in {"name": o["name"], "uri": o.get("uri"), "remote_path": o.get("remote_path"),
                                            "sha256": o.get("sha256"), "size": o.get("size"),
                                            "synced_at": o.get("synced_at")}.items()
                          if v is not None or k == "synced_at"}
                         for o in progress.outputs]
            return finish("completed", artifacts=artifacts), None
        if progress.state == "failed":
            failure = classify(progress.log or "job failed without a log")
            return finish("failed", error=failure.message(), cause=failure.cause, artifacts=[]), failure
        if elapsed >= next_report:  # progress for long jobs: elapsed, cost so far, the runtime's marker
            ctx.say(f"{job_id}: running {elapsed:.0f} s, ${_cost(elapsed, cost_hr):.4f} so far"
                    + (f" (marker {progress.marker})" if progress.marker is not None else ""))
            next_report = elapsed + PROGRESS_EVERY_S
        running_cost = chain.spent_usd + _cost(elapsed + poll_s, cost_hr)  # the chain's budget, retries included
        if exceeds(running_cost, per_job_usd):
            executor.cancel(handle)
            reason = (f"cancelled by the per_job_usd ceiling: the running cost would reach ${running_cost:.4f} "
                      f"> ${per_job_usd:.2f}" + (f" (with ${chain.spent_usd:.4f} of earlier attempts of "
                                                 f"{chain.first})" if chain.first else ""))
            ctx.say(f"{job_id}: {reason}")
            return finish("cancelled", error=reason, cause="per-job-ceiling", artifacts=[]), None
        if elapsed >= deadline_s:
            executor.cancel(handle)
            failure = classify(f"job timed out after {deadline_s:g} s\n{progress.log}")
            return finish("failed", error=failure.message(), cause=failure.cause, artifacts=[]), failure
        ctx.sleep(poll_s)


@final
@dataclass(frozen=True, slots=True)
class Admission:
    """What a job may run on, checked before anything runs: the deployment, workflow, ceilings and deadline."""

    deployment: Deployment
    workflow: dict[str, Any]
    per_job_usd: float | None
    deadline_s: float
    attempts_allowed: int
    expected: Expected
    policy: Policy


def admit(ctx: Context, deployment_id: str, workflow_id: str | None, inputs: dict[str, Any] | None,
          deadline_s: float | None) -> Admission:
    """Refuse, before anything runs, a deployment that is not ready, a missing workflow or bad inputs; and say what
    the job is expected to cost (reserved by run_job against the ceilings)."""
    registry = ctx.registry
    deployment = registry.deployment(deployment_id)
    if deployment.status != "ready":
        raise UserError(f"{deployment_id} is {deployment.status}, not ready", place=deployment_id,
                        hint=("only a passing health run marks it ready; " if deployment.status == "health-checking"
                              else "") + f"next: {next_step(deployment)}")
    workflow = workflow_manifest(ctx, workflow_id or deployment.workflow)
    if workflow is None:
        raise UserError("no workflow given", place=deployment_id, hint="pass --workflow ID")
    check_inputs(workflow, deployment.runtime, inputs or {}, registry.path("workflows.json"))
    policy = Policy(registry.spending_policy())
    per_job_usd = policy.ceilings.per_job_usd
    limit = float(deadline_s or float(workflow["test_generation"].get("timeout_s", 600)) * 10)
    attempts = policy.retry.max_job_attempts
    return Admission(deployment, workflow, per_job_usd, limit, attempts,
                     expected_cost(workflow, deployment.cost_hr, limit, attempts, per_job_usd), policy)


def run_job(ctx: Context, deployment_id: str, *, workflow_id: str | None = None,
            inputs: dict[str, Any] | None = None, poll_s: float = 2.0,
            deadline_s: float | None = None) -> JobResult:
    """Run one job: requires `ready`; its expected cost is reserved against the ceilings first (refused, before
    anything runs, when it does not fit beside what is spent and reserved); at most one retry, only when the
    classified cause allows it."""
    registry = ctx.registry
    with run_lock(ctx, deployment_id):
        admission = admit(ctx, deployment_id, workflow_id, inputs, deadline_s)

        def spent() -> tuple[float, float]:
            return billed_so_far(registry, ctx.now())

        with reserved(registry.root, admission.policy, spent, deployment_id=deployment_id,
                      workflow=str(admission.workflow["id"]), expected=admission.expected, clock=ctx.clock):
            return _run_chain(ctx, admission, inputs, poll_s)


def _run_chain(ctx: Context, admission: Admission, inputs: dict[str, Any] | None, poll_s: float) -> JobResult:
    """The job and its retry on an admitted deployment (its run claim and reservation held)."""
    registry = ctx.registry
    deployment, workflow = admission.deployment, admission.workflow
    deployment_id, per_job_usd, limit = deployment.id, admission.per_job_usd, admission.deadline_s
    attempts_allowed = admission.attempts_allowed
    ledger = Ledger(registry.ledger_path)
    executor: JobExecutor = _executor(ctx, deployment)
    transition(registry, deployment_id, "running", next_action="wait for the job")
    lines: list[dict[str, Any]] = []
    failure: Failure | None = None
    failures = 0
    chain = Chain()
    try:
        while True:
            chain.attempt += 1
            job_id = next_job_id(ledger)
            line, failure = _attempt(ctx, executor, deployment, workflow, dict(inputs or {}), job_id, chain,
                                     per_job_usd=per_job_usd, poll_s=poll_s, deadline_s=limit)
            lines.append(line)
            chain.add(line)
            if line["status"] != "failed" or failure is None:
                break
            failures += 1
            ctx.say(f"{job_id}: failed: {failure.message()}")
            if failures >= 2:
                break
            if per_job_usd is not None and chain.spent_usd >= per_job_usd:
                ctx.say(f"{job_id}: not retried: the job has spent ${chain.spent_usd:.4f} of its per_job_usd "
                        f"${per_job_usd:.2f} (a retry shares the job's budget)")
                break
            if not failure.retryable or chain.attempt >= attempts_allowed:
                if not failure.retryable:
                    ctx.say(f"{job_id}: not retried: {failure.cause} is not a cause a retry can fix")
                break
            ctx.say(f"{job_id}: retrying once ({failure.cause} may be transient)")
    finally:
        executor.close()
    last = lines[-1]
    if failures >= 2:
        transition(registry, deployment_id, "error",
                   error=f"two failed jobs in a row: {failure.message() if failure else 'unknown'}",
                   marker={"jobs": [x["id"] for x in lines]},
                   next_action="read the cause, fix, then re-run the health suite")
    else:
        transition(registry, deployment_id, "ready", marker={"job": last["id"], "status": last["status"]},
                   next_action=f"gpuharness retrieve {deployment_id}" if last.get("artifacts")
                   else "run the next job")
    return JobResult(last["id"], last["status"], float(last.get("cost_usd") or 0.0),
                     float(last.get("duration_s") or 0.0), len(lines), list(last.get("artifacts") or []),
                     failure if last["status"] == "failed" else None, lines)


def _executor(ctx: Context, deployment: Deployment) -> JobExecutor:
    if ctx.executors is None:
        raise UserError("no job runtime is wired for this deployment", place=deployment.id)
    executor: JobExecutor = ctx.executors(deployment)
    return executor
