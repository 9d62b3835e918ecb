"""What the registry's deployments billed: their billed intervals (core.billing), read from its journal, with each
provider's charge for a stopped volume; `spend` and `status` read them, as the audit does from its own pass."""

from __future__ import annotations

from datetime import datetime

from gpuharness.core.billing import Interval, billed_intervals
from gpuharness.core.clock import format_ts, parse_ts, utcnow
from gpuharness.core.journal import read_entries
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry
from gpuharness.core.spend import billed_today_and_month, spend_book


def registry_intervals(registry: Registry, now: datetime) -> dict[str, list[Interval]]:
    """The billed intervals of the registry's deployments, from its journal."""
    journal = list(read_entries(registry.journal_path))
    from gpuharness.providers.factory import stopped_storage_rates

    return billed_intervals(registry.deployments(), journal, now, stopped_storage_rates(registry.providers()))


def billed_so_far(registry: Registry, now: str | None = None) -> tuple[float, float]:
    """Today's and this month's billed spend (UTC days), what every ceiling check reads: each deployment's billed
    intervals, idle uptime included, and jobs where they bill alone (serverless). `now`: an ISO time (default now)."""
    moment = parse_ts(now) if now else utcnow()
    book = spend_book(Ledger(registry.ledger_path).lines(), registry_intervals(registry, moment))
    return billed_today_and_month(book, format_ts(moment))
