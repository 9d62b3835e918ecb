"""Spend from the ledger: each job's billed cost is the cost_usd of its current line."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from gpuharness.core.clock import format_ts, now_ts, parse_ts

GROUPINGS = ("day", "month", "provider", "gpu", "deployment", "total")


def job_costs(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The current line of each job (corrections replace earlier lines)."""
    current: dict[str, dict[str, Any]] = {}
    for record in records:
        current[record["id"]] = record
    return current


def _utc_stamp(record: dict[str, Any]) -> str:
    """completed_at (else started_at, else ts) in UTC, so a day is a UTC day whatever offset was written."""
    stamp = str(record.get("completed_at") or record.get("started_at") or record.get("ts") or "")
    if stamp.endswith(("Z", "z")) or len(stamp) < 11:
        return stamp
    try:
        return format_ts(parse_ts(stamp))
    except ValueError:
        return stamp


def _key(record: dict[str, Any], by: str) -> str:
    stamp = _utc_stamp(record)
    if by == "day":
        return stamp[:10]
    if by == "month":
        return stamp[:7]
    if by == "provider":
        return str(record.get("provider") or "?")
    if by == "gpu":
        return str(record.get("gpu") or "?")
    if by == "deployment":
        return str(record.get("deployment_id") or "?")
    return "total"


def spend_by(records: Iterable[dict[str, Any]], by: str) -> dict[str, float]:
    """Sum billed cost per group (day and month are UTC, taken from completed_at)."""
    if by not in GROUPINGS:
        raise ValueError(f"unknown grouping {by!r}; use one of {', '.join(GROUPINGS)}")
    totals: dict[str, float] = defaultdict(float)
    for record in job_costs(records).values():
        cost = record.get("cost_usd")
        if cost:
            totals[_key(record, by)] += float(cost)
    return {k: round(v, 6) for k, v in sorted(totals.items())}


def today_and_month(records: Iterable[dict[str, Any]], now: str | None = None) -> tuple[float, float]:
    """Spend of the current UTC day and month."""
    stamp = now or now_ts()
    day, month = stamp[:10], stamp[:7]
    spent_day = spent_month = 0.0
    for record in job_costs(records).values():
        cost = float(record.get("cost_usd") or 0.0)
        key = _key(record, "day")
        if key == day:
            spent_day += cost
        if key[:7] == month:
            spent_month += cost
    return spent_day, spent_month
