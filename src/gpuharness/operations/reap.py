"""reap: shutdown rules (idle minutes, max hours, deadline) and keep-alive economics for every live
deployment; a dry run unless --apply, and idleness only from >= 2 observations spanning the idle window."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core import schema
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.deployment import Deployment, ShutdownRule
from gpuharness.core.economics import keep_alive
from gpuharness.core.errors import UserError
from gpuharness.core.journal import read_journal
from gpuharness.core.jsonl import append_record, read_records
from gpuharness.core.ledger import Ledger
from gpuharness.core.policy import Policy
from gpuharness.core.registry import OBSERVATIONS
from gpuharness.operations.context import Context
from gpuharness.operations.destroy import destroy, refusal
from gpuharness.operations.retrieve import retrieve, unsynced
from gpuharness.operations.run import mark_interrupted
from gpuharness.remote import RemoteError
from gpuharness.remote.lines import lines_of
from gpuharness.remote.script import ShellScript


@final
@dataclass(slots=True)
class ReapDecision:
    deployment: str
    action: str  # destroy | keep | busy | refused | destroyed
    reasons: list[str] = field(default_factory=list)
    arithmetic: list[str] = field(default_factory=list)
    idle_since: str | None = None  # set when only idleness (not a deadline or max hours) says destroy
    hard_stop: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "action": self.action, "reasons": self.reasons,
                "arithmetic": self.arithmetic}


def observations_path(ctx: Context) -> Path:
    return ctx.registry.root / OBSERVATIONS


def read_observations(path: Path) -> list[dict[str, Any]]:
    return list(read_records(path, what="observation"))


def activities(ctx: Context, deployments: list[Deployment]) -> dict[str, tuple[str, str]]:
    """(last activity time, progress marker) of each deployment: its latest ledger line or journal entry.
    One pass over the ledger and one over the journal, whatever the number of deployments."""
    stamps: dict[str, list[Any]] = {d.id: [d.created_at, d.ready_at] for d in deployments}
    lines = dict.fromkeys(stamps, 0)
    for record in Ledger(ctx.registry.ledger_path).records():
        dep_id = record.get("deployment_id")
        if dep_id in stamps:
            lines[dep_id] += 1
            stamps[dep_id] += [record.get("ts"), record.get("started_at"), record.get("completed_at")]
    for entry in read_journal(ctx.registry.journal_path):
        if entry.get("deployment") in stamps:
            stamps[entry["deployment"]].append(entry.get("ts"))
    result = {}
    for dep_id, seen in stamps.items():
        last = format_ts(max((parse_ts(s) for s in seen if s), default=ctx.clock()))
        result[dep_id] = (last, f"ledger:{lines[dep_id]}@{last}")
    return result


def activity(ctx: Context, deployment: Deployment) -> tuple[str, str]:
    """(last activity time, progress marker) of one deployment (see activities)."""
    return activities(ctx, [deployment])[deployment.id]


def idle_proof(history: list[dict[str, Any]], marker: str, window_min: float) -> tuple[bool, str]:
    """Idle only when >= 2 observations with no running job and the same progress marker span the window."""
    same = [o for o in history if o.get("marker") == marker and not o.get("running_jobs")]
    if len(same) < 2:
        return False, f"{len(same)} idle observation(s) with no progress; 2 spanning {window_min:g} min needed"
    span = (parse_ts(same[-1]["observed_at"]) - parse_ts(same[0]["observed_at"])).total_seconds() / 60
    if span + 1e-9 < window_min:
        return False, (f"{len(same)} idle observations span {span:.1f} min < the {window_min:g} min window; "
                       "observe again later")
    return True, f"{len(same)} idle observations with no progress span {span:.1f} min >= {window_min:g} min"


def assess(ctx: Context, *, startup_minutes: float = 12.0) -> list[ReapDecision]:
    """Observe every live deployment (recorded) and decide what the rules say. Acts on nothing."""
    registry = ctx.registry
    now = ctx.clock()
    policy = Policy(registry.policy_document())
    running: dict[str, list[str]] = {}
    for record in Ledger(registry.ledger_path).current(status="running").values():
        running.setdefault(record["deployment_id"], []).append(record["id"])
    path = observations_path(ctx)
    history = read_observations(path)
    holding = [d for d in registry.deployments() if d.is_live]
    seen = activities(ctx, holding)
    decisions: list[ReapDecision] = []
    for deployment in holding:
        last, marker = seen[deployment.id]
        observation = _observe(path, deployment, now, running.get(deployment.id, []), last, marker)
        mine = [o for o in history if o.get("deployment") == deployment.id] + [observation]
        decision = ReapDecision(deployment.id, "keep")
        if running.get(deployment.id):
            decision.action = "busy"
            decision.reasons.append(f"job(s) {', '.join(running[deployment.id])} running: never reaped mid-job")
        _hard_stops(decision, deployment, now)
        _future_stamps(decision, deployment, now)
        _idleness(decision, deployment, policy, now, last, marker, mine, startup_minutes)
        if decision.reasons and decision.action != "busy":
            decision.action = "destroy"
        decisions.append(decision)
    return decisions


def _observe(path: Path, deployment: Deployment, now: datetime, running: list[str], last: str,
             marker: str) -> dict[str, Any]:
    """Record one observation of the deployment in observations.jsonl (the history idleness is proven from)."""
    observation = {"deployment": deployment.id, "observed_at": format_ts(now), "status": deployment.status,
                   "running_jobs": running, "last_activity": last, "marker": marker}
    errors, _ = schema.check("observation", observation)
    if errors:  # a bug, not bad input: reap builds the record itself
        raise ValueError(f"bad observation {errors[0].json_path}: {errors[0].message}")
    append_record(path, observation)
    return observation


def _hard_stops(decision: ReapDecision, deployment: Deployment, now: datetime) -> None:
    """The shutdown rule's clock: a deadline that passed, or max_hours reached."""
    rule = deployment.shutdown_rule or ShutdownRule()
    if rule.deadline and now >= parse_ts(rule.deadline):
        decision.reasons.append(f"deadline {rule.deadline} has passed")
        decision.hard_stop = True
    if rule.max_hours is not None:
        age_h = (now - parse_ts(deployment.created_at)).total_seconds() / 3600
        decision.arithmetic.append(f"age = {age_h:.2f} h of max_hours {rule.max_hours:g} h")
        if age_h >= rule.max_hours:
            decision.reasons.append(f"max_hours: up {age_h:.2f} h >= {rule.max_hours:g} h")
            decision.hard_stop = True


# A timestamp further ahead of our clock than this is not skew: it is suspect.
FUTURE_SKEW: Final = timedelta(minutes=5)


def _future_stamps(decision: ReapDecision, deployment: Deployment, now: datetime) -> None:
    """A created_at or ready_at in the future is suspect, never a sign of a young deployment."""
    for name, stamp in (("created_at", deployment.created_at), ("ready_at", deployment.ready_at)):
        if stamp and parse_ts(stamp) - now > FUTURE_SKEW:
            ahead_h = (parse_ts(stamp) - now).total_seconds() / 3600
            decision.reasons.append(f"{name} {stamp} lies {ahead_h:.1f} h in the future (> "
                                    f"{FUTURE_SKEW.total_seconds() / 60:g} min skew): suspect, not young")


def _idleness(decision: ReapDecision, deployment: Deployment, policy: Policy, now: datetime, last: str,
              marker: str, history: list[dict[str, Any]], startup_minutes: float) -> None:
    """Idle past its window (the rule's idle_minutes, else the policy's, else the keep-alive break-even), proven
    by the observations; the keep-alive arithmetic is shown either way."""
    window = (deployment.shutdown_rule or ShutdownRule()).idle_minutes
    source = "idle_minutes rule"
    if window is None and policy.ceilings.max_idle_minutes is not None:
        window, source = policy.ceilings.max_idle_minutes, "policy max_idle_minutes"
    idle_min = max((now - parse_ts(last)).total_seconds() / 60, 0.0)
    economics = keep_alive(cost_hr=deployment.cost_hr, gap_minutes=idle_min, startup_minutes=startup_minutes)
    decision.arithmetic.append(f"idle {idle_min:.1f} min since {last}")
    decision.arithmetic.extend(economics.explain().splitlines()[1:])
    if window is None:
        window, source = startup_minutes, "keep-alive economics (no idle rule)"
    if idle_min >= float(window):
        proven, why = idle_proof(history, marker, float(window))
        decision.arithmetic.append(why)
        if proven:
            decision.reasons.append(f"{source}: idle {idle_min:.1f} min >= {float(window):g} min ({why})")
            decision.idle_since = last


def output_progress(ctx: Context, deployment: Deployment, since: str) -> str | None:
    """A file in the outputs or the checkpoint path newer than `since` (one batched exec), else None.

    The ledger shows jobs this harness ran; this catches work it did not start (a notebook, a training run)."""
    dirs = list(deployment.watched_dirs)  # read only: quoted, not confined
    if deployment.checkpoint_path:
        dirs.append(deployment.checkpoint_path)
    epoch = math.ceil(parse_ts(since).timestamp())  # find compares whole seconds: round toward "not newer"
    script = ShellScript(workspace=deployment.workspace).let("since", f"@{epoch}").code(
        'newer() { for d in "$@"; do case "$d" in -*) d="./$d" ;; esac; [ -d "$d" ] && find "$d" -type f '
        '-newermt "$since" -print 2>/dev/null | head -n 1; done; true; }').call("newer", *dirs)
    remote = ctx.remotes(deployment)
    try:
        result = remote.exec(script.text(), deadline_s=60.0)
    except RemoteError:
        return None  # unreachable: the idle verdict stands on the observations
    finally:
        remote.close()
    found = [line for line in lines_of(result.stdout) if line.strip()]
    return found[0] if found else None


def reap(ctx: Context, *, apply: bool = False, retrieve_to: str | Path = "outputs",
         startup_minutes: float = 12.0) -> list[ReapDecision]:
    """Assess every live deployment; with apply, sync artifacts first, then destroy what the rules say."""
    if apply:
        mark_interrupted(ctx)
    decisions = assess(ctx, startup_minutes=startup_minutes)
    if not apply:
        return decisions
    for decision in decisions:
        if decision.action != "destroy":
            continue
        dep_id = decision.deployment
        deployment = ctx.registry.deployment(dep_id)
        if not decision.hard_stop and decision.idle_since and deployment.ssh_route is not None:
            moved = output_progress(ctx, deployment, decision.idle_since)
            if moved:
                decision.action = "keep"
                decision.reasons.append(f"not idle after all: output progress on the host since "
                                        f"{decision.idle_since} ({moved})")
                continue
        if unsynced(Ledger(ctx.registry.ledger_path), dep_id) and deployment.ssh_route is not None:
            try:
                retrieve(ctx, dep_id, retrieve_to)
            except UserError as exc:
                decision.action = "refused"
                decision.reasons.append(f"artifacts could not be synced, so it was not destroyed: {exc.what}")
                continue
        problem = refusal(ctx, dep_id, dep_id, False)
        if problem is not None:
            decision.action = "refused"
            decision.reasons.append(f"not destroyed: {problem}")
            continue
        try:
            destroy(ctx, dep_id, confirm=dep_id)
        except UserError as exc:
            decision.action = "refused"
            decision.reasons.append(f"destroy failed: {exc.what}")
            continue
        decision.action = "destroyed"
    return decisions
