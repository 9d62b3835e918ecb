"""Launch and terminate once, reconciling a lost response by idempotency key or exact id before any retry."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import final

from gpuharness.policy import Policy
from gpuharness.providers.base import Instance, LaunchSpec, Provider, ProviderError, UnknownOutcome

BACKOFF_S = (5.0, 10.0, 20.0)
BACKOFF_CAP_S = 60.0


@final
@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    instance: Instance
    launch_calls: int
    reconciled: bool


def _wait(attempt: int, retry_after: float | None, sleep: Callable[[float], None]) -> None:
    backoff = min(BACKOFF_S[min(attempt, len(BACKOFF_S) - 1)], BACKOFF_CAP_S) + random.uniform(0, 1)
    sleep(max(retry_after or 0.0, backoff))


def find_by_key(provider: Provider, key: str) -> Instance | None:
    """The live instance carrying this idempotency key, from one list call."""
    for instance in provider.list_instances():
        if instance.idempotency_key == key and instance.status != "terminated":
            return instance
    return None


def launch_reconciled(provider: Provider, spec: LaunchSpec, *, policy: Policy,
                      sleep: Callable[[float], None]) -> LaunchOutcome:
    """Launch; on an unknown outcome list by key first and retry only when nothing was created.

    A 429 or a rate-limit means the launch was not executed: wait max(Retry-After, backoff) and try again.
    Capacity, balance, auth and invalid requests are final. At most max_launch_attempts calls.
    """
    attempts = policy.max_attempts("max_launch_attempts", 2)
    calls = 0
    reconciled = False
    last: ProviderError | None = None
    while calls < attempts:
        calls += 1
        try:
            return LaunchOutcome(provider.launch(spec), calls, reconciled)
        except UnknownOutcome as exc:
            last = exc
            reconciled = True
            found = find_by_key(provider, spec.idempotency_key)
            if found is not None:
                return LaunchOutcome(found, calls, True)
        except ProviderError as exc:
            last = exc
            if exc.kind not in ("rate_limited", "network"):
                raise
            if exc.kind == "network":
                reconciled = True
                found = find_by_key(provider, spec.idempotency_key)
                if found is not None:
                    return LaunchOutcome(found, calls, True)
        if calls < attempts:
            _wait(calls - 1, last.retry_after if last else None, sleep)
    assert last is not None
    raise last


def terminate_reconciled(provider: Provider, instance_id: str, *, sleep: Callable[[float], None],
                         attempts: int = 2) -> int:
    """Terminate; an unknown outcome is reconciled by getting the exact id, never repeated blind.

    Returns the number of terminate calls made.
    """
    calls = 0
    while True:
        calls += 1
        try:
            provider.terminate(instance_id)
            return calls
        except ProviderError as exc:
            if exc.kind == "not_found":
                return calls
            if exc.kind not in ("unknown_outcome", "network", "rate_limited"):
                raise
            if exc.kind != "rate_limited":
                seen = provider.get_instance(instance_id)
                if seen is None or seen.status == "terminated":
                    return calls
            if calls >= attempts:
                raise
            _wait(calls - 1, exc.retry_after, sleep)
