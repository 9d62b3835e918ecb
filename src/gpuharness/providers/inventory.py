"""Provider inventory: one list call (plus pages) per provider, live, recorded, or replayed from a cassette."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, final
from urllib.parse import urlsplit

from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.providers import cassette
from gpuharness.providers.base import Instance, InventorySource, Provider, ProviderError


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
        """Every listed instance, provider by provider."""
        for items in self.instances.values():
            yield from items

    def find(self, provider: str, instance_id: str) -> Instance | None:
        """The instance with this exact id at provider, or None."""
        return next((i for i in self.instances.get(provider, ()) if i.id == instance_id), None)

    def with_key(self, provider: str, key: str) -> list[Instance]:
        """The instances at provider carrying this idempotency key."""
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


ProviderFactory = Callable[[dict[str, Any]], Provider]


def listed_providers(entries: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """providers.json entries whose instances come from the provider's list (owned servers: the registry is
    theirs; serverless endpoints have workers, not instances)."""
    from gpuharness.providers.factory import capabilities_of  # the adapters (and httpx): only when listing

    return [dict(e) for e in entries if capabilities_of(e).inventory is InventorySource.API]


def record_inventory(path: Path, entries: Iterable[Mapping[str, Any]], factory: ProviderFactory, *,
                     secrets: Iterable[str] = (), recorded_against: str | None = None,
                     registry_root: Path | None = None) -> Inventory:
    """List every provider live (one list call plus pages each) while recording the calls to a cassette.

    The metadata names the registry it was recorded for (relative to the cassette), so checks of another
    registry do not judge it against this inventory."""
    chosen = listed_providers(entries)
    bases = {str(e["name"]): str(e.get("api_base") or "") for e in chosen}
    against = recorded_against or (cassette.SIMULATOR if all(_loopback(b) for b in bases.values())
                                   else "the live provider APIs")
    with cassette.use(path, cassette.Mode.RECORD, secrets=secrets, recorded_against=against,
                      metadata={"api_bases": bases, "kinds": {str(e["name"]): str(e["kind"]) for e in chosen},
                                "registry": recorded_for(registry_root, path)}):
        return _list_all(chosen, factory, source=f"cassette:{path}")


def recorded_for(registry_root: Path | None, path: Path) -> str | None:
    """The registry directory relative to the cassette's directory (portable when both are committed)."""
    if registry_root is None:
        return None
    return os.path.relpath(registry_root.resolve(), path.resolve().parent)


def recorded_registry(path: Path) -> Path | None:
    """The registry a recorded inventory was made for, resolved, or None when it does not say."""
    name = cassette.read_metadata(path).get("registry")
    return (path.resolve().parent / str(name)).resolve() if name else None


def recorded_inventory(path: Path, entries: Iterable[Mapping[str, Any]], factory: ProviderFactory) -> Inventory:
    """Replay the recorded list calls (mode none: no network, no credentials) through the adapters."""
    metadata = cassette.read_metadata(path)
    bases: dict[str, str] = dict(metadata.get("api_bases") or {})
    listed = listed_providers(entries)
    missing = [str(e["name"]) for e in listed if e["name"] not in bases]
    if missing:
        raise UserError(f"no recorded inventory for provider(s) {', '.join(missing)} of providers.json", path=path,
                        hint="re-record it: `gpuharness status --refresh --gpu-mode record --cassette PATH`")
    chosen = [{**e, "api_base": bases[str(e["name"])]} for e in listed]
    stamp = str(metadata.get("recorded_at") or now_ts())
    with cassette.use(path, cassette.Mode.OFFLINE):
        return _list_all(chosen, factory, source=f"cassette:{path}", clock=lambda: stamp)


def current(registry: Registry, mode: cassette.Mode, path: Path, *, deadline_s: float = 300.0) -> Inventory:
    """The provider inventory for the registry's providers: listed live, listed live and recorded to path, or
    replayed from path (offline: no network, no credentials). Every provider's client gets the same phase
    deadline, started together: the whole listing ends by deadline_s."""
    entries = registry.providers()
    if mode is cassette.Mode.OFFLINE:
        return recorded_inventory(path, entries, adapter_factory(offline=True))
    if mode is cassette.Mode.RECORD:
        names = [e.get("credential_env") for e in entries]
        return record_inventory(path, entries, adapter_factory(deadline_s=deadline_s),
                                secrets=cassette.secret_values(names), registry_root=registry.root)
    return _list_all(listed_providers(entries), adapter_factory(deadline_s=deadline_s), source="live")


def _list_all(entries: list[dict[str, Any]], factory: ProviderFactory, *, source: str,
              clock: Callable[[], str] = now_ts) -> Inventory:
    providers: dict[str, Provider] = {}
    try:
        for entry in entries:
            providers[str(entry["name"])] = factory(entry)
        return fetch_inventory(providers, source=source, clock=clock)
    finally:
        for provider in providers.values():
            provider.close()


def _loopback(base: str) -> bool:
    host = urlsplit(base).hostname or ""
    return host in ("127.0.0.1", "localhost", "::1")


#: Stands in for the API key when replaying: never a secret, long enough for the adapters' key check.
OFFLINE_KEY = "offline-replay-not-a-credential"


def adapter_factory(*, offline: bool = False, deadline_s: float | None = None) -> ProviderFactory:
    """The real provider adapters (with deadline_s: the phase deadline of each client). Offline, they get a
    placeholder key and a sleep that does not wait (the cassette answers; recorded retries must not cost wall
    time)."""
    from gpuharness.providers.factory import PhaseOptions, build_provider

    if not offline:
        options = PhaseOptions() if deadline_s is None else PhaseOptions(deadline_s=deadline_s)
        return lambda entry: build_provider(entry, options=options)

    def replaying(entry: dict[str, Any]) -> Provider:
        env = {str(entry.get("credential_env") or "GPUHARNESS_OFFLINE_KEY"): OFFLINE_KEY}
        return build_provider({**entry, "credential_env": next(iter(env))}, env=env,
                              options=PhaseOptions(sleep=lambda _s: None))

    return replaying
