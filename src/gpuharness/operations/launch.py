"""Launch and terminate through the providers' reconciled mutations, honouring Retry-After between attempts."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, final

from gpuharness.policy import Policy
from gpuharness.providers.base import Instance, LaunchSpec, Provider, ProviderError
from gpuharness.providers.mutation import launch_reconciled as provider_launch
from gpuharness.providers.mutation import terminate_reconciled as provider_terminate

BACKOFF_S = (5.0, 10.0, 20.0)
BACKOFF_CAP_S = 60.0


@final
@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    instance: Instance
    launch_calls: int
    reconciled: bool
    events: tuple[dict[str, Any], ...] = field(default=())


def _wait(attempt: int, retry_after: float | None, sleep: Callable[[float], None]) -> None:
    backoff = min(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)], BACKOFF_CAP_S) + random.uniform(0, 1)
    sleep(max(retry_after or 0.0, backoff))


def launch_reconciled(provider: Provider, spec: LaunchSpec, *, policy: Policy,
                      sleep: Callable[[float], None]) -> LaunchOutcome:
    """At most max_launch_attempts launch calls; each retry is preceded by a listing for the key (never a
    duplicate) and, after a 429, by max(Retry-After, backoff). Capacity, auth, balance and invalid are final."""
    attempts = policy.max_attempts("max_launch_attempts", 2)
    events: list[dict[str, Any]] = []
    for attempt in range(1, attempts + 1):
        try:
            instance = provider_launch(provider, spec, events.append, 1, check_first=True)
        except ProviderError as exc:
            if exc.kind not in ("rate_limited", "network") or attempt == attempts:
                raise
            _wait(attempt - 1, exc.retry_after, sleep)
            continue
        calls = sum(1 for e in events if e.get("event") == "attempt")
        reconciled = any(e.get("event") in ("unknown_outcome", "exists") for e in events)
        return LaunchOutcome(instance, calls, reconciled, tuple(events))
    raise AssertionError("unreachable")


def terminate_reconciled(provider: Provider, instance_id: str, *, sleep: Callable[[float], None],
                         attempts: int = 2) -> int:
    """Terminate the exact id, verified by listing; a lost answer is reconciled, never repeated blind.
    Returns the number of terminate calls."""
    events: list[dict[str, Any]] = []
    del sleep  # the provider's client waits inside its own deadline
    provider_terminate(provider, instance_id, events.append, attempts)
    return sum(1 for e in events if e.get("event") == "attempt")
