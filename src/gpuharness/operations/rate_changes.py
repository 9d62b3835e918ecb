"""Rate changes found by refresh: a live deployment whose provider now reports another hourly price.

Each becomes a new billed segment (core.billing reads the marker), is journaled as an observation (from == to)
and is held against `max_cost_hr`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core import lifecycle
from gpuharness.core.billing import RATE_CHANGE
from gpuharness.core.deployment import Deployment
from gpuharness.core.journal import JournalEntry, read_entries
from gpuharness.core.policy import EPSILON, Policy, exceeds
from gpuharness.core.registry import Registry
from gpuharness.providers.base import Instance


@final
@dataclass(frozen=True, slots=True)
class RateChange:
    """A deployment's new rate as its provider reports it; ceiling: max_cost_hr when the new rate exceeds it."""

    deployment_id: str
    provider: str
    instance_id: str
    previous_cost_hr: float
    cost_hr: float
    ceiling: float | None = None

    @property
    def exceeds_ceiling(self) -> bool:
        return self.ceiling is not None

    def message(self) -> str:
        text = (f"rate change on {self.deployment_id}: {self.provider} now bills ${self.cost_hr:.3f}/hr "
                f"(was ${self.previous_cost_hr:.3f}/hr, instance {self.instance_id})")
        if self.ceiling is not None:
            text += (f"; above max_cost_hr ${self.ceiling:.3f}/hr: destroy it "
                     f"(`gpuharness destroy {self.deployment_id}`) or raise the ceiling")
        return text

    def to_json(self) -> dict[str, Any]:
        return {"kind": RATE_CHANGE, "deployment_id": self.deployment_id, "provider": self.provider,
                "instance_id": self.instance_id, "previous_cost_hr": self.previous_cost_hr,
                "cost_hr": self.cost_hr, "max_cost_hr": self.ceiling, "exceeds_max_cost_hr": self.exceeds_ceiling,
                "message": self.message()}


def rate_changes(deployments: Iterable[Deployment], listed: Mapping[tuple[str, str], Instance],
                 max_cost_hr: float | None) -> list[RateChange]:
    """Live deployments whose listed instance reports a price other than the recorded one."""
    found: list[RateChange] = []
    for dep in deployments:
        instance = listed.get((dep.provider, str(dep.instance_id)))
        if not dep.is_live or not dep.instance_id or instance is None or instance.cost_hr is None:
            continue
        if instance.cost_hr < 0 or abs(instance.cost_hr - dep.cost_hr) <= EPSILON:
            continue
        ceiling = max_cost_hr if exceeds(instance.cost_hr, max_cost_hr) else None
        found.append(RateChange(dep.id, dep.provider, dep.instance_id, dep.cost_hr, instance.cost_hr, ceiling))
    return found


def record_rate_changes(registry: Registry, deployments: Iterable[Deployment],
                        listed: Mapping[tuple[str, str], Instance], observed_at: str) -> list[RateChange]:
    """Journal each rate change (a transition entry from == to, marker `rate-change`) and record the new rate."""
    changes = rate_changes(deployments, listed, Policy(registry.policy_document()).ceilings.max_cost_hr)
    for change in changes:
        deployment = registry.update_deployment(change.deployment_id, cost_hr=change.cost_hr)
        marker = {"event": RATE_CHANGE, "cost_hr": change.cost_hr, "previous_cost_hr": change.previous_cost_hr}
        lifecycle.journal(registry, JournalEntry.of(
            deployment, route="provider-list", observed_at=observed_at, marker=marker, note=change.message(),
            next_action=f"gpuharness destroy {change.deployment_id}" if change.exceeds_ceiling else None))
    return changes


def last_rate_changes(registry: Registry) -> dict[str, dict[str, Any]]:
    """Each deployment's last journaled rate change (its marker, with the time it was observed)."""
    last: dict[str, dict[str, Any]] = {}
    for entry in read_entries(registry.journal_path):
        marker = entry.marker
        if isinstance(marker, Mapping) and marker.get("event") == RATE_CHANGE:
            last[entry.deployment] = {**marker, "observed_at": entry.observed_at}
    return last


def rate_note(deployment: Deployment, change: Mapping[str, Any] | None, max_cost_hr: float | None) -> str:
    """What `status` says after a deployment's line: its last rate change, and whether it exceeds max_cost_hr."""
    if change is None:
        return ""
    previous = change.get("previous_cost_hr")
    text = (f"  rate ${float(change['cost_hr']):.3f}/hr since {change.get('observed_at')}"
            + (f" (was ${float(previous):.3f}/hr)" if isinstance(previous, int | float) else ""))
    if deployment.is_live and exceeds(deployment.cost_hr, max_cost_hr):
        text += f"  OVER max_cost_hr ${max_cost_hr:.3f}/hr"
    return text
