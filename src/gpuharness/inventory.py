"""Provider inventory: one list call (plus pages) per provider, live, recorded, or replayed from a cassette."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, final

from gpuharness.clock import now_ts
from gpuharness.providers.base import Instance, Provider, ProviderError


@final
@dataclass(frozen=True, slots=True)
class Inventory:
    """What the providers reported, by provider name, from one list call (plus pages) each."""

    instances: Mapping[str, tuple[Instance, ...]]
    observed_at: str
    source: str = "live"
    skipped: Mapping[str, str] = field(default_factory=dict)

    def covers(self, provider: str) -> bool:
        """Whether this inventory listed provider (a deployment elsewhere cannot be judged)."""
        return provider in self.instances

    def all(self) -> Iterator[Instance]:
        for items in self.instances.values():
            yield from items

    def find(self, provider: str, instance_id: str) -> Instance | None:
        return next((i for i in self.instances.get(provider, ()) if i.id == instance_id), None)

    def with_key(self, provider: str, key: str) -> list[Instance]:
        return [i for i in self.instances.get(provider, ()) if i.idempotency_key == key]

    def to_json(self) -> dict[str, Any]:
        return {"observed_at": self.observed_at, "source": self.source, "skipped": dict(self.skipped),
                "instances": {p: [i.to_json() for i in items] for p, items in self.instances.items()}}


def fetch_inventory(providers: Mapping[str, Provider], *, source: str = "live",
                    clock: Callable[[], str] = now_ts) -> Inventory:
    """Call list_instances once per provider. A provider that cannot list (unsupported) is skipped, with why."""
    found: dict[str, tuple[Instance, ...]] = {}
    skipped: dict[str, str] = {}
    observed_at = clock()
    for name, provider in providers.items():
        try:
            found[name] = tuple(provider.list_instances())
        except ProviderError as exc:
            if exc.kind != "unsupported":
                raise
            skipped[name] = str(exc)
    return Inventory(found, observed_at, source, skipped)
