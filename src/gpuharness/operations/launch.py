"""Launch and terminate for the lifecycle: the providers' reconciled mutations, with the policy's attempt budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, final

from gpuharness.core.clock import WallClock, utcnow
from gpuharness.core.policy import Policy
from gpuharness.providers.base import Instance, LaunchSpec, Provider
from gpuharness.providers.mutation import EventLog, launch_reconciled, terminate_reconciled


@final
@dataclass(frozen=True, slots=True)
class LaunchOutcome:
    instance: Instance
    launch_calls: int
    reconciled: bool
    events: tuple[dict[str, Any], ...] = field(default=())


def launch_instance(provider: Provider, spec: LaunchSpec, *, policy: Policy, sleep: Callable[[float], None],
                    on_event: EventLog | None = None, before_call: Callable[[], None] | None = None,
                    clock: WallClock = utcnow) -> LaunchOutcome:
    """At most max_launch_attempts launch calls, never a duplicate (the key is listed first and after any lost
    answer); a 429 waits max(Retry-After, backoff). Capacity, auth, balance and invalid end it. on_event hears
    each attempt before its call goes out, and each outcome, as they happen; before_call then runs before each call
    goes out (the launcher's claim is checked there: what it raises ends the launch, nothing sent). The whole phase
    ends by the policy's launch_deadline_s (measured on clock, the clock sleep advances), whatever the attempts."""
    events: list[dict[str, Any]] = []

    def hear(event: dict[str, Any]) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    ends_at = clock() + timedelta(seconds=policy.launch_deadline_s)

    def remaining() -> float:
        return (ends_at - clock()).total_seconds()

    instance = launch_reconciled(provider, spec, hear, policy.retry.max_launch_attempts,
                                 check_first=True, sleep=sleep, before_call=before_call, remaining=remaining)
    calls = sum(1 for e in events if e.get("event") == "attempt")
    reconciled = any(e.get("event") in ("reconciled", "exists") for e in events)
    return LaunchOutcome(instance, calls, reconciled, tuple(events))


def terminate_instance(provider: Provider, instance_id: str, *, attempts: int = 2) -> int:
    """Terminate the exact id, verified by listing; a lost answer is reconciled, never repeated blind.
    Returns the number of terminate calls."""
    events: list[dict[str, Any]] = []
    terminate_reconciled(provider, instance_id, events.append, attempts)
    return sum(1 for e in events if e.get("event") == "attempt")
