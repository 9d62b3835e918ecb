"""What the registry's deployments billed (their billed intervals, core.billing, read from its journal, with each
provider's charge for a stopped volume) against what their jobs used: billed, used and idle, as `spend` counts them,
for the audit's spend summary and `status`."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from gpuharness.core.billing import Interval, billed_intervals
from gpuharness.core.errors import UserError
from gpuharness.core.journal import read_journal
from gpuharness.core.registry import Registry
from gpuharness.core.spend import Spent


def registry_intervals(registry: Registry, now: datetime) -> dict[str, list[Interval]]:
    """The billed intervals of the registry's deployments, from its journal."""
    journal = list(read_journal(registry.journal_path)) if registry.journal_path.exists() else []
    from gpuharness.providers.factory import capabilities_of

    storage = {}
    for entry in registry.providers():
        try:
            storage[str(entry["name"])] = capabilities_of(entry).stopped_storage_usd_gb_month
        except UserError:  # an unknown kind: `validate` names it; its storage is not counted here
            continue
    return billed_intervals(registry.deployments(), journal, now, storage)


def billed_used_idle(intervals: Mapping[str, list[Interval]], used: Mapping[str, float]) -> dict[str, Spent]:
    """Per deployment: billed (its intervals; a deployment without any bills its jobs, as a serverless endpoint
    does), used (its jobs' current lines, `used` per deployment) and idle (the difference)."""
    out: dict[str, Spent] = {}
    for deployment in sorted(set(intervals) | set(used)):
        spent = used.get(deployment, 0.0)
        billed = sum(i.cost for i in intervals[deployment]) if deployment in intervals else spent
        out[deployment] = Spent(billed=billed, used=spent)
    return out


def spend_summary(registry: Registry, now: datetime, used: Mapping[str, float]) -> dict[str, Any]:
    """{billed, used, idle} in total and per deployment (rounded), or {"unavailable": why} when the registry's
    deployments or journal do not read (the audit's checks name the broken line)."""
    try:
        book = billed_used_idle(registry_intervals(registry, now), used)
    except UserError as exc:
        return {"unavailable": exc.line()}
    total = Spent()
    for spent in book.values():
        total.add(spent)
    return {**total.to_json(), "deployments": {d: s.to_json() for d, s in book.items()}}
