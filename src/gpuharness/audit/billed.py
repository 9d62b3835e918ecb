"""What the registry's deployments billed: their billed intervals (core.billing), read from its journal, with each
provider's charge for a stopped volume; `spend` and `status` read them, as the audit does from its own pass."""

from __future__ import annotations

from datetime import datetime

from gpuharness.core.billing import Interval, billed_intervals
from gpuharness.core.journal import read_journal
from gpuharness.core.registry import Registry


def registry_intervals(registry: Registry, now: datetime) -> dict[str, list[Interval]]:
    """The billed intervals of the registry's deployments, from its journal."""
    journal = list(read_journal(registry.journal_path)) if registry.journal_path.exists() else []
    from gpuharness.providers.factory import stopped_storage_rates

    return billed_intervals(registry.deployments(), journal, now, stopped_storage_rates(registry.providers()))
