"""The provider's bill against our billed intervals (core.billing), per deployment and UTC day.

A provider's billing records become `Charge`s (one instance, one UTC day, an amount); our intervals are cut at
UTC midnight (Interval.by_day). Each (deployment, day) is one `BillLine`: ours, theirs and the difference, which is
within policy `cost_tolerance` when |theirs - ours| does not exceed abs_usd + rel × the larger of the two. A charge
for an instance no deployment names is a line of its own (deployment ""): money billed that the registry never saw.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Final, final

from gpuharness.core.billing import Interval
from gpuharness.core.deployment import Deployment
from gpuharness.core.policy import exceeds

#: the length of a UTC day's text, YYYY-MM-DD
DAY_LEN: Final = 10


@final
@dataclass(frozen=True, slots=True)
class Charge:
    """What a provider billed for one instance on one UTC day (YYYY-MM-DD), in $."""

    provider: str
    instance_id: str
    day: str
    amount_usd: float

    def to_json(self) -> dict[str, Any]:
        return {"provider": self.provider, "instance_id": self.instance_id, "day": self.day,
                "amount_usd": round(self.amount_usd, 6)}


@final
@dataclass(frozen=True, slots=True)
class BillLine:
    """One deployment's day: our billed intervals against the provider's charges."""

    deployment: str
    provider: str
    instance_id: str
    day: str
    ours: float
    theirs: float

    @property
    def difference(self) -> float:
        """The provider's figure minus ours (positive: billed more than we counted)."""
        return self.theirs - self.ours

    def over(self, tolerance: tuple[float, float]) -> bool:
        """Whether the difference exceeds policy cost_tolerance (abs_usd, rel)."""
        abs_usd, rel = tolerance
        return exceeds(abs(self.difference), abs_usd + rel * max(self.ours, self.theirs))

    def subject(self) -> str:
        return self.deployment or f"{self.provider}:{self.instance_id} (in no deployment)"

    def message(self, tolerance: tuple[float, float]) -> str:
        """One line naming the deployment, the day and the amount."""
        return (f"{self.subject()} on {self.day}: the provider billed ${self.theirs:.4f}, our intervals "
                f"${self.ours:.4f}: a difference of ${self.difference:+.4f} beyond cost_tolerance "
                f"(${tolerance[0]:g} + {tolerance[1]:.0%})")

    def to_json(self, tolerance: tuple[float, float]) -> dict[str, Any]:
        return {"deployment": self.deployment, "provider": self.provider, "instance_id": self.instance_id,
                "day": self.day, "ours_usd": round(self.ours, 6), "provider_usd": round(self.theirs, 6),
                "difference_usd": round(self.difference, 6), "over_tolerance": self.over(tolerance)}


def compare(charges: Iterable[Charge], intervals: Mapping[str, list[Interval]], deployments: Iterable[Deployment],
            providers: Iterable[str], since: str = "", until: datetime | None = None) -> list[BillLine]:
    """Every (deployment, day) of the providers billed, from `since` (YYYY-MM-DD, "" for all), by day then
    deployment. Our side counts the deployments of those providers only, up to `until` (when the bill was read:
    a bill replayed later is not held against what billed after it); theirs, every charge of theirs."""
    billed = set(providers)
    by_instance = {(d.provider, d.instance_id): d for d in deployments if d.instance_id and d.provider in billed}
    sums: dict[tuple[str, str, str, str], list[float]] = {}
    for deployment in by_instance.values():
        for interval in intervals.get(deployment.id, []):
            if until is not None and interval.end > until:
                interval = replace(interval, end=max(interval.start, until))
            for day, cost in interval.by_day():
                if day >= since:
                    key = (deployment.id, deployment.provider, deployment.instance_id or "", day)
                    sums.setdefault(key, [0.0, 0.0])[0] += cost
    for charge in charges:
        if charge.provider not in billed or charge.day < since:
            continue
        found = by_instance.get((charge.provider, charge.instance_id))
        key = (found.id if found else "", charge.provider, charge.instance_id, charge.day[:DAY_LEN])
        sums.setdefault(key, [0.0, 0.0])[1] += charge.amount_usd
    lines = [BillLine(d, p, i, day, ours, theirs) for (d, p, i, day), (ours, theirs) in sums.items()]
    return sorted(lines, key=lambda line: (line.day, line.subject()))
