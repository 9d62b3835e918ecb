"""Billed intervals: what a deployment costs from launch to a verified stop or destroy, read from the journal.

A deployment bills from the journal entry that first names its instance (the launch) until a verified stop or
destroy (any journaled transition to `stopped` or `destroyed`, whoever made it), at its rate. A rate change is
a journal entry whose marker is `{"event": "rate-change", "cost_hr": X}` (with `previous_cost_hr` when known):
it starts a new segment. While stopped, a pod's volume bills where the provider charges for it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final, final

from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.deployment import BILLING, Deployment
from gpuharness.core.journal import JournalEntry

#: The journal marker's `event` for a new rate on a live deployment.
RATE_CHANGE: Final = "rate-change"
#: Transitions that end the instance's billed interval (journaled after the provider confirmed them).
ENDS: Final = frozenset({"stopped", "destroyed"})
#: A stop journaled after the fact (its guard's, read from the pod's log) names when it happened in its marker:
#: the billed interval ends then, not when the journal learnt of it.
STOPPED_AT: Final = "stopped_at"
#: A provider's charge for a stopped pod's volume is its adapter's (Capabilities.stopped_storage_usd_gb_month),
#: given here per providers.json name. Vast.ai charges the offer's own storage_cost, which the registry does not
#: record: not counted.
#: the disk a launch asks for unless told (providers.base.LaunchSpec.disk_gb)
DEFAULT_DISK_GB: Final = 50
_HOURS_PER_MONTH: Final = 730.0


@final
@dataclass(frozen=True, slots=True)
class Interval:
    """One billed segment of a deployment at one rate: `instance` (GPU uptime) or `storage` (a stopped volume)."""

    deployment: str
    provider: str
    gpu: str
    start: datetime
    end: datetime
    cost_hr: float
    kind: str = "instance"

    @property
    def hours(self) -> float:
        return max(0.0, (self.end - self.start).total_seconds()) / 3600.0

    @property
    def cost(self) -> float:
        return self.hours * self.cost_hr

    def by_day(self) -> Iterator[tuple[str, float]]:
        """The segment's cost per UTC day it spans."""
        moment = self.start
        while moment < self.end:
            midnight = (moment + timedelta(days=1)).replace(hour=0, minute=0, second=0, microsecond=0)
            upto = min(midnight, self.end)
            yield format_ts(moment)[:10], (upto - moment).total_seconds() / 3600.0 * self.cost_hr
            moment = upto

    def to_json(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "kind": self.kind, "start": format_ts(self.start),
                "end": format_ts(self.end), "cost_hr": self.cost_hr, "hours": round(self.hours, 6),
                "cost_usd": round(self.cost, 6)}


def storage_cost_hr(deployment: Deployment, per_gb_month: float) -> float:
    """What its stopped volume bills per hour, at its provider's $ per GB-month."""
    disk = deployment.extra.get("disk_gb")
    gb = float(disk) if isinstance(disk, int | float) and not isinstance(disk, bool) else DEFAULT_DISK_GB
    return per_gb_month * gb / _HOURS_PER_MONTH


def rate_of(marker: Any) -> tuple[float, float | None] | None:
    """(new rate, previous rate or None) when a journal marker is a rate change (provision's `billed_cost_hr`
    warning is one too), else None."""
    if not isinstance(marker, Mapping):
        return None
    if marker.get("event") == RATE_CHANGE:
        new, previous = _number(marker.get("cost_hr")), _number(marker.get("previous_cost_hr"))
    else:  # provision's warning that the provider bills more than was accepted
        new, previous = _number(marker.get("billed_cost_hr")), _number(marker.get("accepted_cost_hr"))
    return None if new is None else (new, previous)


def _number(value: Any) -> float | None:
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return None


@dataclass(slots=True)
class _Meter:
    """The running state while a deployment's journal is read."""

    deployment: Deployment
    rate: float
    intervals: list[Interval]
    since: datetime | None = None
    kind: str = "instance"
    launched: bool = False
    storage_usd_gb_month: float = 0.0

    def open(self, at: datetime, kind: str) -> None:
        self.since, self.kind = at, kind

    def close(self, at: datetime) -> None:
        if self.since is None:
            return
        cost_hr = self.rate if self.kind == "instance" else storage_cost_hr(self.deployment, self.storage_usd_gb_month)
        if cost_hr > 0 and at > self.since:
            d = self.deployment
            self.intervals.append(Interval(d.id, d.provider, d.gpu or "?", self.since, at, cost_hr, self.kind))
        self.since = None

    def read(self, entry: JournalEntry, at: datetime) -> None:
        to_state, from_state = entry.to_state, entry.from_state
        change = rate_of(entry.marker)
        if change is not None:
            if self.since is not None and self.kind == "instance":
                self.close(at)
                self.open(at, "instance")
            self.rate = change[0]
        elif to_state in ENDS and from_state != to_state:
            self.close(at)
            if to_state == "stopped":
                self.open(at, "storage")
        elif to_state in BILLING and (self.since is None or self.kind == "storage") and (
                (entry.target_id and not self.launched) or from_state == "stopped"):
            self.close(at)
            self.launched = True
            self.open(at, "instance")


def _initial_rate(deployment: Deployment, entries: list[JournalEntry]) -> float:
    """The launch rate: the previous rate of the first rate change, else the deployment's cost_hr."""
    for entry in entries:
        change = rate_of(entry.marker)
        if change is not None:
            return change[1] if change[1] is not None else deployment.cost_hr
    return deployment.cost_hr


def deployment_intervals(deployment: Deployment, entries: list[JournalEntry], now: datetime,
                         storage_usd_gb_month: float = 0.0) -> list[Interval]:
    """The billed segments of one deployment from its journal entries (in journal order). Without any entry, one
    segment from created_at to destroyed_at (or now while it bills). Serverless endpoints have none: their jobs
    are what they bill."""
    if deployment.is_serverless:
        return []
    meter = _Meter(deployment, _initial_rate(deployment, entries), [],
                   storage_usd_gb_month=storage_usd_gb_month)
    for entry in entries:
        at = _moment(entry.ts)
        if isinstance(entry.marker, Mapping) and entry.to_state in ENDS:
            at = min(filter(None, (at, _moment(entry.marker.get(STOPPED_AT)))), default=None)
        if at is not None:
            meter.read(entry, at)
    if not entries and deployment.instance_id and deployment.created_at and deployment.status != "stopped":
        start = _moment(deployment.created_at)
        if start is not None:
            meter.open(start, "instance")
    if meter.since is not None:
        end = _moment(deployment.destroyed_at) if deployment.status == "destroyed" else None
        meter.close(end or max(now, meter.since))
    return meter.intervals


def billed_intervals(deployments: Iterable[Deployment], journal: Iterable[JournalEntry],
                     now: datetime, storage: Mapping[str, float] | None = None) -> dict[str, list[Interval]]:
    """Every deployment's billed segments (serverless ones and those with nothing billed are left out); storage:
    $ per GB-month of a stopped volume, per providers.json name."""
    by_deployment: dict[str, list[JournalEntry]] = {}
    for entry in journal:
        by_deployment.setdefault(entry.deployment, []).append(entry)
    out: dict[str, list[Interval]] = {}
    for deployment in deployments:
        found = deployment_intervals(deployment, by_deployment.get(deployment.id, []), now,
                                     (storage or {}).get(deployment.provider, 0.0))
        if found or (not deployment.is_serverless and deployment.instance_id):
            out[deployment.id] = found
    return out


def _moment(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return parse_ts(text)
    except ValueError:
        return None
