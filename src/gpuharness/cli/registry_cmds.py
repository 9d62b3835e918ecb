"""Commands over the registry itself: init, validate, ledger, spend, economics."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from gpuharness.audit.billed import registry_intervals
from gpuharness.cli import emit, existing_registry, show
from gpuharness.cli.arguments import non_negative, whole
from gpuharness.core import schema
from gpuharness.core.clock import now_ts, utcnow
from gpuharness.core.economics import keep_alive
from gpuharness.core.errors import UserError
from gpuharness.core.job_line import JobLine
from gpuharness.core.jsonl import read_records
from gpuharness.core.ledger import Ledger
from gpuharness.core.policy import Policy, against
from gpuharness.core.registry import DOCUMENTS, LEDGER, OBSERVATIONS, Registry
from gpuharness.core.spend import (
    GROUPINGS,
    ONE_LINER,
    Spent,
    billed_today_and_month,
    explain_one_liner,
    group_book,
    job_costs,
    spend_book,
)
from gpuharness.core.statefile import parse_json_text


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser("init", parents=[common], help="create .pi/gpu/ with empty files and a default policy")
    p.set_defaults(handler=cmd_init)

    p = subparsers.add_parser("validate", parents=[common],
                              help="check every state file and ledger line against its schema (read-only)")
    p.set_defaults(handler=cmd_validate)

    ledger = subparsers.add_parser("ledger", help="the append-only job ledger (jobs.jsonl)")
    sub = ledger.add_subparsers(dest="ledger_command", metavar="ACTION", required=True)
    p = sub.add_parser("append", parents=[common],
                       help="validated, locked, atomic append of one JSON object (stdin or --line)")
    p.add_argument("--line", help="the JSON object (default: read stdin)")
    p.set_defaults(handler=cmd_ledger_append)
    p = sub.add_parser("show", parents=[common], help="the current state of each job (or of --job ID)")
    p.add_argument("--job", help="one job id")
    p.set_defaults(handler=cmd_ledger_show)

    p = subparsers.add_parser("spend", parents=[common], help="billed spend from the ledger, against the ceilings")
    p.add_argument("--by", choices=GROUPINGS, default="total", help="how to group the figures (default total)")
    p.add_argument("--explain", action="store_true",
                   help="also show, job by job with its ledger lines, why the total differs from the jq one-liner "
                        "it replaces (failed jobs bill; corrected lines are counted once)")
    p.set_defaults(handler=cmd_spend)

    p = subparsers.add_parser("economics", parents=[common], help="keep-alive versus destroy arithmetic")
    p.add_argument("--deployment", help="take cost_hr from this deployment")
    p.add_argument("--cost-hr", type=non_negative, help="hourly cost (overrides the deployment's)")
    p.add_argument("--gap-minutes", type=non_negative, required=True, help="expected idle gap until the next job")
    p.add_argument("--startup-minutes", type=non_negative, default=12.0,
                   help="provision+install+load time (default 12)")
    p.add_argument("--jobs", type=whole(minimum=1), default=2, help="jobs in the batch (N)")
    p.add_argument("--avg-job-minutes", type=non_negative, default=0.0, help="how long a job runs, in minutes")
    p.add_argument("--retryable", action="store_true", help="the queue is retryable (spot/bid may pay)")
    p.set_defaults(handler=cmd_economics)


def cmd_init(args: argparse.Namespace) -> int:
    registry = Registry.locate(args.registry, search=False)
    created = registry.init()
    emit(args, {"registry": str(registry.root), "created": [str(p) for p in created]},
         f"registry {registry.root}: created {len(created)} file(s)"
         + "".join(f"\n  {p}" for p in created))
    return 0


def existing_ledger(registry: Registry) -> Ledger:
    """The registry's ledger; a missing jobs.jsonl is an error, not an empty history."""
    if not registry.ledger_path.exists():
        raise UserError("file not found", path=registry.ledger_path,
                        hint="run `gpuharness init` to create an empty ledger")
    return Ledger(registry.ledger_path)


def _checked_lines(path: Path, schema_name: str) -> int:
    """Schema-check every complete line of a JSON Lines file; the first bad one is a one-line error."""
    count = 0
    for lineno, record in enumerate(read_records(path), start=1):
        errors, _ = schema.check(schema_name, record)
        if errors:
            raise UserError(errors[0].message, path=path, place=f"{lineno}:{errors[0].json_path}",
                            hint="fix or move that line; nothing was changed")
        count += 1
    return count


def cmd_validate(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    report: dict[str, Any] = {"registry": str(registry.root), "files": {}}
    for file_name in DOCUMENTS:
        document = registry.load(file_name)
        _, key = DOCUMENTS[file_name]
        report["files"][file_name] = {"items": len(document[key]) if key else None}
    ledger = existing_ledger(registry)
    lines = sum(1 for _ in ledger.checked_records())
    report["files"][LEDGER] = {"lines": lines}
    torn = ledger.torn_tail()
    if torn is not None:
        registry.warnings.append(f"{ledger.path}:{torn.lineno}:1: a torn last line at byte {torn.offset} (a "
                                 "writer died mid-write); it is not history and the next append quarantines it")
    for path, schema_name in ((registry.journal_path, "transition"), (registry.path(OBSERVATIONS), "observation")):
        if os.path.lexists(path):  # a dangling or looping symlink is there, and unreadable
            report["files"][path.name] = {"lines": _checked_lines(path, schema_name)}
    report["warnings"] = list(registry.warnings)
    text = [f"ok {name}: " + ", ".join(f"{v} {k}" for k, v in info.items() if v is not None)
            if any(v is not None for v in info.values()) else f"ok {name}"
            for name, info in report["files"].items()]
    text += [f"warning: {w}" for w in registry.warnings]
    emit(args, report, "\n".join(text))
    return 0


def cmd_ledger_append(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    text = args.line if args.line is not None else sys.stdin.read()
    source = "<stdin>" if args.line is None else "--line"
    record = parse_json_text(text, source)
    if not isinstance(record, dict):
        raise UserError("expected one JSON object", path=source, place="1:1", hint="nothing was appended")
    ledger = Ledger(registry.ledger_path)
    for warning in ledger.append(record, check_sequence=True):
        show(f"gpuharness: warning: {warning}", err=True)
    emit(args, {"appended": record.get("id"), "ledger": str(ledger.path)},
         f"appended {record.get('id')} ({record.get('status')}) to {ledger.path}")
    return 0


def cmd_ledger_show(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    ledger = existing_ledger(registry)
    current = job_costs(ledger.checked_records())
    if args.job:
        state = current.get(args.job)
        if state is None:
            raise UserError(f"no job {args.job!r}", path=ledger.path)
        emit(args, state, f"{state['id']}: {state['status']} on {state['deployment_id']}")
        return 0
    lines = [f"{j['id']:<14} {j['status']:<11} {j['deployment_id']:<16} ${float(j.get('cost_usd') or 0):.4f}"
             for j in current.values()]
    emit(args, list(current.values()), "\n".join(lines) or "(no jobs)")
    return 0


def cmd_spend(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    numbered = [(lineno, JobLine.from_record(record))
                for lineno, record in enumerate(existing_ledger(registry).checked_records(), 1)]
    lines = [line for _, line in numbered]
    book = spend_book(lines, registry_intervals(registry, utcnow()))
    groups = group_book(book, args.by)
    policy = Policy(registry.policy_document())
    today, month = billed_today_and_month(book, now_ts())
    limits = policy.ceilings
    ceilings = {"daily_usd": limits.daily_usd, "monthly_usd": limits.monthly_usd, "per_job_usd": limits.per_job_usd}
    total = group_book(book, "total").get("total") or Spent()
    payload = {"by": args.by, "spend": {k: round(v.billed, 6) for k, v in groups.items()},
               "groups": {k: v.to_json() for k, v in groups.items()}, "total": round(total.billed, 6),
               "used_total": round(total.used, 6), "idle_total": round(total.idle, 6),
               "today": round(today, 6), "this_month": round(month, 6), "ceilings": ceilings,
               "ceilings_from": registry.policy_origin(), "one_liner": ONE_LINER}
    width = max((len(k) for k in groups), default=5)
    text = [f"{'':<{width}}  {'billed':>12} {'used':>12} {'idle':>12}"]
    if args.by != "total":  # the total's own line follows
        text += [f"{k:<{width}}  {_usd(v.billed):>12} {_usd(v.used):>12} {_usd(v.idle):>12}"
                 for k, v in groups.items()]
    text.append(f"{'total':<{width}}  {_usd(total.billed):>12} {_usd(total.used):>12} {_usd(total.idle):>12}")
    text.append(f"today ${today:,.2f} billed{against('daily_usd', limits.daily_usd)}; "
                f"this month ${month:,.2f}{against('monthly_usd', limits.monthly_usd)}")
    if not registry.has_policy():
        text.append(f"ceilings: {registry.policy_origin()}")
    explanation = explain_one_liner(numbered)
    text.append(f"the jobs (used) ${explanation.spend:,.4f}; the seeds' one-liner says ${explanation.one_liner:,.4f}")
    if args.explain:
        payload["explain"] = explanation.to_json()
        text += ["", f"against {ONE_LINER}:", *explanation.lines()]
    emit(args, payload, "\n".join(text))
    return 0


def _usd(value: float) -> str:
    return f"-${-value:,.4f}" if value < 0 else f"${value:,.4f}"


def cmd_economics(args: argparse.Namespace) -> int:
    cost_hr = args.cost_hr
    retryable = args.retryable
    if cost_hr is None:
        if not args.deployment:
            raise UserError("give --deployment ID or --cost-hr X", place="economics")
        cost_hr = existing_registry(args).deployment(args.deployment).cost_hr
    try:
        result = keep_alive(cost_hr=cost_hr, gap_minutes=args.gap_minutes, startup_minutes=args.startup_minutes,
                            jobs=args.jobs, avg_job_minutes=args.avg_job_minutes, retryable=retryable)
    except ValueError as exc:
        raise UserError(str(exc), place="economics") from None
    emit(args, result.to_json(), result.explain())
    return 0
