"""`gpuharness bill`: the providers' own billing records against our billed intervals, per deployment and UTC day."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Any

from gpuharness.cli import emit, existing_registry
from gpuharness.cli.arguments import timeout_option
from gpuharness.cli.plan_cmds import provider_errors_as_user_errors
from gpuharness.cli.registry_cmds import registry_intervals
from gpuharness.core.bill import BillLine
from gpuharness.core.clock import parse_ts, utcnow
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.providers import cassette
from gpuharness.providers.bill import DEFAULT_BILL_CASSETTE, Bill, bill_lines, current_bill

#: the window read without --since: the last 30 UTC days (RunPod's own default)
DEFAULT_DAYS = 30


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser("bill", parents=[common],
                              help="the providers' own bills against our billed intervals, per deployment and day")
    p.add_argument("--provider", metavar="NAME", help="only this provider (RunPod or Vast.ai kinds)")
    p.add_argument("--since", metavar="DATE", help=f"first UTC day, YYYY-MM-DD (default {DEFAULT_DAYS} days ago)")
    p.add_argument("--gpu-mode", choices=("live", "record", "offline"), default="live",
                   help="live reads the bills; record also writes --cassette; offline replays --cassette")
    p.add_argument("--cassette", type=Path, default=DEFAULT_BILL_CASSETTE,
                   help=f"bill cassette for record/offline (default {DEFAULT_BILL_CASSETTE})")
    timeout_option(p, 120.0, "seconds for every provider's bill")
    p.set_defaults(handler=provider_errors_as_user_errors(cmd_bill))


def since_day(text: str | None, now: datetime) -> datetime:
    """Midnight UTC of --since (YYYY-MM-DD or RFC 3339), or of DEFAULT_DAYS days ago; a bad or future one is a
    one-line UserError."""
    if text is None:
        return datetime.combine(now.date() - timedelta(days=DEFAULT_DAYS), time(), UTC)
    try:
        moment = parse_ts(text) if "T" in text.upper() else datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
    except ValueError:
        raise UserError(f"{text!r} is not a date", place="--since", hint="write it YYYY-MM-DD, e.g. 2026-12-01") \
            from None
    day = datetime.combine(moment.astimezone(UTC).date(), time(), UTC)
    if day > now:
        raise UserError(f"{text!r} lies in the future", place="--since", hint="give a day up to today")
    return day


def cmd_bill(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    now = utcnow()
    bill = current_bill(registry, cassette.Mode.parse(args.gpu_mode), args.cassette, since_day(args.since, now), now,
                        only=args.provider, deadline_s=args.deadline)
    tolerance = Policy(registry.policy_document()).cost_tolerance
    lines = bill_lines(bill, registry_intervals(registry, parse_ts(bill.until)), registry.deployments())
    over = [line for line in lines if line.over(tolerance)]
    emit(args, payload(bill, lines, tolerance), render(bill, lines, tolerance))
    return 1 if over else 0


def payload(bill: Bill, lines: list[BillLine], tolerance: tuple[float, float]) -> dict[str, Any]:
    """bill --json: the window, the providers read, each (deployment, day) and the totals."""
    ours, theirs = sum(line.ours for line in lines), sum(line.theirs for line in lines)
    return {**{k: v for k, v in bill.to_json().items() if k != "charges"},
            "tolerance": {"abs_usd": tolerance[0], "rel": tolerance[1]},
            "lines": [line.to_json(tolerance) for line in lines],
            "totals": {"ours_usd": round(ours, 6), "provider_usd": round(theirs, 6),
                       "difference_usd": round(theirs - ours, 6)},
            "differences": sum(1 for line in lines if line.over(tolerance))}


def render(bill: Bill, lines: list[BillLine], tolerance: tuple[float, float]) -> str:
    """The table, then each difference beyond tolerance, then what was not read."""
    width = max((len(line.subject()) for line in lines), default=10)
    text = [f"bill {bill.since[:10]} .. {bill.until[:10]} from {', '.join(bill.providers) or '(no provider)'} "
            f"({bill.source})", f"{'day':<10}  {'deployment':<{width}}  {'ours':>10} {'provider':>10} {'diff':>10}"]
    text += [f"{line.day:<10}  {line.subject():<{width}}  ${line.ours:>9.4f} ${line.theirs:>9.4f} "
             f"{line.difference:>+10.4f}{'  OVER' if line.over(tolerance) else ''}" for line in lines]
    if not lines:
        text.append("(nothing billed in the window)")
    ours, theirs = sum(line.ours for line in lines), sum(line.theirs for line in lines)
    text.append(f"{'total':<10}  {'':<{width}}  ${ours:>9.4f} ${theirs:>9.4f} {theirs - ours:>+10.4f}")
    over = [line for line in lines if line.over(tolerance)]
    text += [f"difference: {line.message(tolerance)}" for line in over]
    text.append(f"{len(over)} difference(s) beyond cost_tolerance" if over else "every day within cost_tolerance")
    text += [f"not read: {name}: {why}" for name, why in bill.skipped.items()]
    return "\n".join(text)
