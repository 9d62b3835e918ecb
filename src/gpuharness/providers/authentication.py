"""`providers check`: one cheap authenticated read per provider, recorded in providers.json."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.registry import Registry
from gpuharness.providers.base import Authenticating, ProviderError
from gpuharness.providers.factory import PhaseOptions, build_provider, build_serverless, capabilities_of


@final
@dataclass(frozen=True, slots=True)
class AuthResult(JsonFields):
    """The outcome for one provider. `authenticated` is None when it could not be decided (network, no key)."""

    name: str
    kind: str
    authenticated: bool | None
    detail: str
    checked_at: str


def check_one(entry: Mapping[str, Any], registry: Registry, *, env: Mapping[str, str] | None = None,
              options: PhaseOptions | None = None) -> AuthResult:
    """One authenticated read. Missing/truncated keys and refusals become results, never echoing the key."""
    name, kind = str(entry.get("name")), str(entry.get("kind"))
    try:
        capabilities = capabilities_of(entry)
        if capabilities.serverless:
            if not entry.get("endpoint_id"):
                return AuthResult(name, kind, None, "no endpoint_id to check against", now_ts())
            client: Any = build_serverless(entry, env=env, options=options)
        else:
            client = build_provider(entry, env=env, options=options, registry=registry)
        if not isinstance(client, Authenticating):
            return AuthResult(name, kind, None, "this adapter has no authenticated read", now_ts())
        try:
            client.check()
        finally:
            client.close()
    except UserError as exc:
        return AuthResult(name, kind, False, exc.what + (f" ({exc.hint})" if exc.hint else ""), now_ts())
    except ProviderError as exc:
        decided = False if exc.kind == "auth" else None
        return AuthResult(name, kind, decided, str(exc), now_ts())
    return AuthResult(name, kind, True, "key accepted" if capabilities.api_base else "inventory from machines.json",
                      now_ts())


def check_all(registry: Registry, *, env: Mapping[str, str] | None = None, options: PhaseOptions | None = None,
              only: str | None = None) -> list[AuthResult]:
    """Check every provider (or `only`) and record authenticated + checked_at in providers.json."""
    entries = [e for e in registry.providers() if only is None or e["name"] == only]
    if only is not None and not entries:
        raise UserError(f"no provider {only!r}", path=registry.path("providers.json"))
    results = [check_one(entry, registry, env=env, options=options) for entry in entries]
    by_name = {r.name: r for r in results}
    with registry.update("providers.json") as document:
        for entry in document["providers"]:
            result = by_name.get(entry["name"])
            if result is not None:
                entry["authenticated"] = result.authenticated
                entry["checked_at"] = result.checked_at
    return results
