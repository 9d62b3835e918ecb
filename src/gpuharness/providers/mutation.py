"""Launch and terminate with reconciliation: a lost answer is an unknown outcome, settled by listing."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from gpuharness.core.clock import now_ts
from gpuharness.providers.base import Instance, LaunchSpec, Provider, ProviderError, UnknownOutcome
from gpuharness.providers.transport import RetryPolicy, retry_wait

#: Receives each attempt of a mutation and its outcome (events of the mutation, not the transition journal).
EventLog = Callable[[dict[str, Any]], None]

#: kinds after which the launch certainly did not happen and another attempt (within the budget) is reasonable
RETRY_LAUNCH_ON = ("capacity", "rate_limited", "network")


def find_by_key(provider: Provider, key: str) -> Instance | None:
    """The live instance carrying this idempotency key (name or label), from one list call plus pages."""
    for instance in provider.list_instances():
        if instance.status != "terminated" and (instance.idempotency_key == key or instance.name == key):
            return instance
    return None


def _entry(provider: Provider, op: str, attempt: int, event: str, **extra: Any) -> dict[str, Any]:
    return {"ts": now_ts(), "provider": provider.name, "op": op, "attempt": attempt, "event": event, **extra}


def launch_reconciled(provider: Provider, spec: LaunchSpec, events: EventLog, max_attempts: int = 2, *,
                      check_first: bool = True, settle_polls: int = 2, settle_s: float = 5.0,
                      sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                      before_call: Callable[[], None] | None = None,
                      remaining: Callable[[], float] | None = None) -> Instance:
    """Launch at most max_attempts times, never duplicating: an instance with the key is found before any retry.

    - check_first: one list before the first launch; an instance already carrying the key is returned.
    - UnknownOutcome (timeout, dropped connection, ambiguous 5xx): list and match the key, up to settle_polls
      listings settle_s apart (a timed-out request may still be committed late); launch again only when
      nothing was created.
    - capacity / rate limit / connect failure: the launch did not happen; retried within max_attempts, after
      max(Retry-After, backoff) (the same wait as reads, see providers.transport.retry_wait).
    - auth, balance, invalid, unsupported: raised at once.
    Every attempt and its outcome is passed to `events`. before_call runs after an attempt is heard and before its
    call goes out (the launcher's claim is checked there); what it raises ends the launch, heard as `not_sent`.
    remaining: seconds left of the launch phase's deadline; no attempt starts and no wait begins that would pass it,
    whatever max_attempts says (heard as `deadline`).
    """
    key = spec.idempotency_key
    if check_first:
        existing = find_by_key(provider, key)
        if existing is not None:
            events(_entry(provider, "launch", 0, "exists", key=key, instance_id=existing.id))
            return existing
    last: ProviderError | None = None
    for attempt in range(1, max_attempts + 1):
        if last is not None and remaining is not None and remaining() <= 0:
            events(_entry(provider, "launch", attempt - 1, "deadline", key=key, kind=last.kind))
            raise ProviderError(last.kind, f"launch of {key} stopped at the launch phase's deadline after "
                                f"{attempt - 1} attempt(s): {last}", provider=provider.name, status=last.status)
        events(_entry(provider, "launch", attempt, "attempt", key=key, gpu=spec.gpu, gpu_count=spec.gpu_count))
        if before_call is not None:
            try:
                before_call()
            except Exception as exc:
                events(_entry(provider, "launch", attempt, "not_sent", key=key, error=str(exc)))
                raise
        try:
            instance = provider.launch(spec)
        except UnknownOutcome as exc:
            last = exc
            events(_entry(provider, "launch", attempt, "unknown_outcome", key=key, error=str(exc)))
            found = _settle(provider, key, attempt, events, max(settle_polls, 1), settle_s, sleep)
            if found is not None:
                events(_entry(provider, "launch", attempt, "reconciled", key=key, instance_id=found.id))
                return found
            events(_entry(provider, "launch", attempt, "nothing_created", key=key))
            continue
        except ProviderError as exc:
            last = exc
            events(_entry(provider, "launch", attempt, "refused", key=key, kind=exc.kind, error=str(exc)))
            if exc.kind not in RETRY_LAUNCH_ON:
                raise
            if attempt < max_attempts:
                wait = retry_wait(attempt, exc.retry_after, RetryPolicy(), rng or random.Random())
                if remaining is not None and wait >= remaining():
                    events(_entry(provider, "launch", attempt, "deadline", key=key, kind=exc.kind, wait_s=wait))
                    raise ProviderError(exc.kind, f"launch of {key} stopped at the launch phase's deadline after "
                                        f"{attempt} attempt(s) (the next wait, {wait:g} s, would pass it): {exc}",
                                        provider=provider.name, status=exc.status,
                                        retry_after=exc.retry_after) from None
                events(_entry(provider, "launch", attempt, "wait", key=key, wait_s=round(wait, 3)))
                sleep(wait)
            continue
        events(_entry(provider, "launch", attempt, "created", key=key, instance_id=instance.id))
        return instance
    assert last is not None
    events(_entry(provider, "launch", max_attempts, "gave_up", key=key, kind=last.kind))
    raise ProviderError(last.kind, f"launch of {key} failed after {max_attempts} attempt(s): {last}",
                        provider=provider.name, status=last.status, retry_after=last.retry_after)


def _settle(provider: Provider, key: str, attempt: int, events: EventLog, polls: int, settle_s: float,
            sleep: Callable[[float], None]) -> Instance | None:
    """List until the key shows up or the polls run out; a failing listing keeps the outcome unknown."""
    for poll in range(1, polls + 1):
        try:
            found = find_by_key(provider, key)
        except ProviderError as list_error:
            events(_entry(provider, "launch", attempt, "reconcile_failed", key=key, error=str(list_error)))
            raise UnknownOutcome(f"launch of {key} may have happened and the listing to check failed "
                                 f"({list_error.kind}); do not launch again before `status --refresh`",
                                 provider=provider.name) from None
        if found is not None:
            return found
        if poll < polls:
            events(_entry(provider, "launch", attempt, "not_listed_yet", key=key, poll=poll))
            sleep(settle_s)
    return None


def terminate_reconciled(provider: Provider, instance_id: str, events: EventLog, max_attempts: int = 2) -> bool:
    """Terminate the exact id and verify by listing that it is gone (or terminated).

    A lost answer is checked by listing; terminate is repeated (same exact id) only while the instance is still
    listed as live. Returns True once verified gone; raises ProviderError when it is still there after the budget.
    """
    for attempt in range(1, max_attempts + 1):
        events(_entry(provider, "terminate", attempt, "attempt", instance_id=instance_id))
        try:
            provider.terminate(instance_id)
            events(_entry(provider, "terminate", attempt, "accepted", instance_id=instance_id))
        except UnknownOutcome as exc:
            events(_entry(provider, "terminate", attempt, "unknown_outcome", instance_id=instance_id,
                           error=str(exc)))
        except ProviderError as exc:
            events(_entry(provider, "terminate", attempt, "refused", instance_id=instance_id, kind=exc.kind,
                           error=str(exc)))
            if exc.kind not in ("rate_limited", "network", "server"):
                raise
        still = next((i for i in provider.list_instances() if i.id == instance_id), None)
        if still is None or still.status == "terminated":
            events(_entry(provider, "terminate", attempt, "verified_gone", instance_id=instance_id))
            return True
        events(_entry(provider, "terminate", attempt, "still_listed", instance_id=instance_id,
                       status=still.status))
    raise ProviderError("server", f"{instance_id} is still listed after {max_attempts} terminate attempt(s); it "
                        "is still billing: check the provider console", provider=provider.name)
