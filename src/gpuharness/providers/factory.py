"""Build a Provider from a providers.json entry and the credential in the environment it names: the entry's kind
picks the adapter from the provider table (providers.base.ADAPTERS), where each adapter declares itself."""

from __future__ import annotations

import os
import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, final

import httpx

from gpuharness.core.clock import WallClock, utcnow
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.providers.base import ADAPTERS, Adapter, Capabilities, InventorySource, Provider, ProviderKind
from gpuharness.providers.serverless import ServerlessEndpoint
from gpuharness.providers.transport import ProviderHttp, RetryPolicy, Sleep
from gpuharness.remote.http import Monotonic

#: shortest plausible key; anything shorter was cut when pasted ([UNVERIFIED] exact lengths per provider)
MIN_KEY_LENGTH = 20


@final
@dataclass(frozen=True, slots=True)
class PhaseOptions:
    """Transport settings of one phase: deadline, timeouts, retry policy and the injectable time sources."""

    deadline_s: float = 300.0
    timeout_s: float = 30.0
    policy: RetryPolicy = field(default_factory=RetryPolicy)
    sleep: Sleep = time.sleep
    monotonic: Monotonic = time.monotonic
    wall: WallClock = utcnow
    rng: random.Random | None = None
    transport: httpx.BaseTransport | None = None


def credential(entry: Mapping[str, Any], env: Mapping[str, str] | None = None) -> str:
    """The API key from the variable the entry names; UserError (never echoing the value) when unusable."""
    environ = os.environ if env is None else env
    name = entry.get("name", "?")
    variable = entry.get("credential_env")
    if not variable:
        raise UserError(f"provider {name!r} names no credential_env", path="providers.json", place=f"{name}",
                        hint="set credential_env to the environment variable holding the API key")
    value = environ.get(str(variable))
    if value is None or not value.strip():
        raise UserError(f"${variable} is not set (provider {name!r})", path="providers.json",
                        place=f"{name}.credential_env", hint=f"export {variable}=<your API key>")
    key = value.strip()
    if len(key) < MIN_KEY_LENGTH or any(c.isspace() for c in key):
        raise UserError(f"${variable} looks truncated or damaged ({len(key)} characters, expected at least "
                        f"{MIN_KEY_LENGTH} with no spaces; provider {name!r})", path="providers.json",
                        place=f"{name}.credential_env", hint="copy the whole key again from the provider's console")
    return key


def kind_of(entry: Mapping[str, Any]) -> ProviderKind:
    """The kind of a providers.json entry; an unknown one is a one-line UserError naming the entry."""
    return ProviderKind.parse(entry.get("kind"), place=f"{entry.get('name', '?')}.kind")


def adapter_of(entry: Mapping[str, Any]) -> type[Adapter]:
    """The adapter class of a providers.json entry's kind (UserError naming the entry: an unknown kind)."""
    return ADAPTERS[kind_of(entry).value]


def capabilities_of(entry: Mapping[str, Any]) -> Capabilities:
    """What the entry's provider offers (its adapter's capabilities)."""
    return adapter_of(entry).capabilities


def stopped_storage_rates(entries: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """$ per GB-month that each providers.json entry's provider charges for a stopped pod's volume, by name (an
    entry of an unknown kind is left out: `validate` names it)."""
    rates: dict[str, float] = {}
    for entry in entries:
        try:
            rates[str(entry.get("name"))] = capabilities_of(entry).stopped_storage_usd_gb_month
        except UserError:
            continue
    return rates


def default_api_base(kind: str) -> str | None:
    """The real API host of a provider kind, used when an entry has no api_base (None: no API)."""
    found = ADAPTERS.get(kind)
    return found.capabilities.api_base if found is not None else None


def http_for(entry: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
             options: PhaseOptions | None = None) -> ProviderHttp:
    """One HTTP client for one provider entry, for one phase."""
    opts = options or PhaseOptions()
    kind = kind_of(entry)
    base = entry.get("api_base") or adapter_of(entry).capabilities.api_base
    if not base:
        raise UserError(f"provider {entry.get('name')!r} ({kind.value}) has no API", path="providers.json",
                        place=str(entry.get("name")))
    return ProviderHttp(str(entry.get("name", kind.value)), str(base), credential(entry, env),
                        credential_env=entry.get("credential_env"), deadline_s=opts.deadline_s,
                        timeout_s=opts.timeout_s, policy=opts.policy, sleep=opts.sleep, monotonic=opts.monotonic,
                        wall=opts.wall, rng=opts.rng, transport=opts.transport)


def build_provider(entry: Mapping[str, Any], *, env: Mapping[str, str] | None = None,
                   options: PhaseOptions | None = None, registry: Registry | None = None) -> Provider:
    """The adapter for a providers.json entry whose provider has instances (every kind but serverless)."""
    kind = kind_of(entry)
    name = str(entry.get("name", kind.value))
    adapter: Any = adapter_of(entry)
    if adapter.capabilities.serverless:
        raise UserError(f"provider {name!r} is a serverless endpoint, not a source of instances",
                        path="providers.json", place=name, hint="use build_serverless for its jobs")
    if adapter.capabilities.inventory is InventorySource.MACHINES_JSON:  # no API: the registry lists them
        provider: Provider = adapter(name, registry or Registry.locate())
    else:
        provider = adapter(name, http_for(entry, env=env, options=options))
    return provider


def build_serverless(entry: Mapping[str, Any], endpoint_id: str | None = None, *,
                     env: Mapping[str, str] | None = None, options: PhaseOptions | None = None) -> ServerlessEndpoint:
    """The client of a RunPod Serverless endpoint (id from the argument or the entry's endpoint_id)."""
    name = str(entry.get("name", ServerlessEndpoint.kind.value))
    endpoint = endpoint_id or entry.get("endpoint_id")
    if not endpoint:
        raise UserError(f"provider {name!r} names no endpoint_id", path="providers.json", place=name,
                        hint="add endpoint_id (the id in https://api.runpod.ai/v2/<endpoint_id>/...)")
    return ServerlessEndpoint(name, http_for(entry, env=env, options=options), str(endpoint))
