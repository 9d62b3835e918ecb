"""A running job's progress: the probe's marker now, against its previous observation in the journal."""

from __future__ import annotations

from typing import Any, Final

from gpuharness.core import lifecycle
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.journal import JournalEntry, read_entries
from gpuharness.core.registry import Registry
from gpuharness.probe.probing import ProgressObservation

NOTE: Final = "progress observation"


def observe(registry: Registry, deployment: Deployment, current: dict[str, int], *, route: str | None,
            journaled: bool) -> ProgressObservation:
    """The previous observation of this deployment's marker; the current one is journaled when `journaled`
    (a live probe: a replay is not an observation of the host as it is now)."""
    previous: Any = None
    previous_at: str | None = None
    try:
        for entry in read_entries(registry.journal_path):
            if entry.deployment == deployment.id and entry.note == NOTE:
                previous, previous_at = entry.marker, entry.observed_at or entry.ts
        if journaled:
            lifecycle.journal(registry, JournalEntry.of(deployment, marker=current, note=NOTE,
                                                        route=route))
    except UserError as exc:
        return ProgressObservation(current, problem=exc.line())
    return ProgressObservation(current, previous if isinstance(previous, dict) else None, previous_at)
