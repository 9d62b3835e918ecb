"""One HTTP client per provider per phase: bounded, deadline-aware retries for reads, one shot for mutations, over
the one HTTP seam (remote.http.PhaseHttp), which carries the phase deadline and bounds every answer."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any, final

import httpx

from gpuharness.core import secrets
from gpuharness.core.clock import WallClock, utcnow
from gpuharness.core.json_text import loads_outside
from gpuharness.providers.base import ProviderError, UnknownOutcome
from gpuharness.providers.failures import classify, redact
from gpuharness.remote.http import CallRecord, Monotonic, PhaseHttp, answer_of

log = logging.getLogger("gpuharness.http")

Sleep = Callable[[float], None]

#: kinds worth another attempt on a read; capacity/balance/auth/invalid answers will not change by waiting
RETRYABLE = ("rate_limited", "server", "network")


@final
@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Reads: at most max_attempts in total; backoff 5/10/20 s capped at cap_s, plus up to jitter_s."""

    max_attempts: int = 3
    backoff_s: tuple[float, ...] = (5.0, 10.0, 20.0)
    cap_s: float = 60.0
    jitter_s: float = 1.0


def parse_retry_after(value: str | None, now: datetime) -> float | None:
    """Retry-After as delta-seconds or an HTTP date; None when absent or unreadable."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            moment = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if moment is None:
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=now.tzinfo)
        return max(0.0, (moment - now).total_seconds())
    return max(0.0, seconds)


def retry_wait(failed_attempts: int, retry_after: float | None, policy: RetryPolicy, rng: random.Random) -> float:
    """Seconds to wait after the n-th failed attempt: max(Retry-After, capped backoff + jitter)."""
    index = min(max(failed_attempts, 1), len(policy.backoff_s)) - 1
    backoff = min(policy.backoff_s[index], policy.cap_s) + rng.uniform(0.0, policy.jitter_s)
    return max(retry_after or 0.0, backoff)


@final
class ProviderHttp:
    """The HTTP client of one provider for one phase (provision, reconcile, destroy...).

    Sleep, the monotonic clock, the wall clock and the jitter source are injectable so tests take no time.
    """

    def __init__(self, provider: str, base_url: str, api_key: str | None, *, credential_env: str | None = None,
                 deadline_s: float = 300.0, timeout_s: float = 30.0, policy: RetryPolicy | None = None,
                 sleep: Sleep = time.sleep, monotonic: Monotonic = time.monotonic, wall: WallClock = utcnow,
                 rng: random.Random | None = None, transport: httpx.BaseTransport | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        self.provider = provider
        self.credential_env = credential_env
        self.policy = policy or RetryPolicy()
        self.sleep = sleep
        self.wall = wall
        self.rng = rng or random.Random()
        self.timeout_s = timeout_s
        self._secret = api_key
        secrets.remember(api_key)  # whatever variable it came from, no sink of this process writes it
        all_headers = {"Accept": "application/json", "User-Agent": "gpuharness/0.1"}
        if api_key:
            all_headers["Authorization"] = f"Bearer {api_key}"
        all_headers.update(headers or {})
        self.http = PhaseHttp(base_url.rstrip("/"), headers=all_headers, timeout_s=timeout_s,
                              deadline_s=deadline_s, transport=transport, monotonic=monotonic)

    @property
    def calls(self) -> list[CallRecord]:
        """Every HTTP exchange (attempt) this client made, as the seam recorded it."""
        return self.http.calls

    # public API
    def read(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
             allow: tuple[int, ...] = ()) -> httpx.Response:
        """An idempotent read: retried on 429, 5xx and transport errors within the attempt budget and deadline.

        Statuses in `allow` (e.g. 404 for a get) are returned, not raised.
        """
        waited = 0.0
        attempt = 0
        while True:
            attempt += 1
            try:
                response = self._send(method, path, params, json, attempt, waited)
            except httpx.TransportError as exc:
                error = ProviderError("network", f"{method} {path}: {self._describe(exc)}", provider=self.provider)
            else:
                if response.is_success or response.status_code in allow:
                    return response
                error = self._classify(response)
            if error.kind not in RETRYABLE or attempt >= self.policy.max_attempts:
                if error.kind in RETRYABLE:
                    raise ProviderError(error.kind, f"{_strip(error)} (gave up after {attempt} attempts)",
                                        provider=self.provider, status=error.status, retry_after=error.retry_after)
                raise error
            waited = retry_wait(attempt, error.retry_after, self.policy, self.rng)
            remaining = self.remaining()
            if waited > remaining:
                raise ProviderError(error.kind, f"{_strip(error)} (next retry in {waited:.1f}s would pass the phase "
                                    f"deadline; {max(remaining, 0):.1f}s left)", provider=self.provider,
                                    status=error.status, retry_after=error.retry_after)
            log.info("%s %s %s: %s; retry %d in %.1fs", self.provider, method, path, error.kind, attempt + 1, waited)
            self.sleep(waited)

    def mutate(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
               json: Any = None, allow: tuple[int, ...] = ()) -> httpx.Response:
        """A mutation: exactly one attempt. A lost or ambiguous answer raises UnknownOutcome."""
        try:
            response = self._send(method, path, params, json, 1, 0.0)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            # the request never left: nothing can have happened
            raise ProviderError("network", f"{method} {path}: {self._describe(exc)}", provider=self.provider) from None
        except httpx.TransportError as exc:
            raise UnknownOutcome(f"{method} {path}: the response was lost ({self._describe(exc)}); it may or may not "
                                 "have happened: reconcile before retrying", provider=self.provider) from None
        if response.is_success or response.status_code in allow:
            return response
        error = self._classify(response)
        if error.kind == "server":
            raise UnknownOutcome(f"{method} {path}: {_strip(error)}; it may or may not have happened: reconcile "
                                 "before retrying", provider=self.provider)
        raise error

    def remaining(self) -> float:
        """Seconds left until this phase's deadline (the seam carries it)."""
        left = self.http.phase_left()
        return 0.0 if left is None else left

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ProviderHttp:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def count(self, method: str | None = None, path_prefix: str = "") -> int:
        """How many HTTP exchanges (attempts) this client made, optionally filtered."""
        return self.http.count(method, path_prefix)

    # internals
    def _send(self, method: str, path: str, params: Mapping[str, Any] | None, json: Any, attempt: int,
              waited: float) -> httpx.Response:
        if self.remaining() <= 0:
            raise ProviderError("network", f"{method} {path}: the phase deadline has passed", provider=self.provider)
        # the whole answer by its timeout and the phase deadline, under its cap (the seam)
        response = self.http.request(method, path, params=params, json=json, attempt=attempt, waited_s=waited)
        log.debug("%s %s %s -> %d (attempt %d)", self.provider, method, path, response.status_code, attempt)
        return response

    def _classify(self, response: httpx.Response) -> ProviderError:
        retry_after = parse_retry_after(response.headers.get("Retry-After"), self.wall())
        return classify(self.provider, response.status_code, response.text, credential_env=self.credential_env,
                        retry_after=retry_after, secret=self._secret)

    def _describe(self, exc: Exception) -> str:
        return redact(f"{type(exc).__name__}: {exc}", self._secret)


def json_body(response: httpx.Response, provider: str, *, mutation: bool = False) -> Any:
    """A provider's JSON answer, parsed under core.json_text's depth bound (its bytes are capped by read_answer).
    One that is not JSON, or nests too deeply, is a ProviderError (`server`); after a mutation an UnknownOutcome:
    the call may have happened, so it is reconciled, never repeated blind."""
    try:
        return loads_outside(response.content, what=answer_of(response))
    except ValueError as exc:
        if mutation:
            raise UnknownOutcome(f"{exc}; the answer cannot be read, so the call may or may not have happened: "
                                 "reconcile before retrying", provider=provider) from None
        raise ProviderError("server", f"unexpected response: {exc}", provider=provider) from None


def _strip(error: ProviderError) -> str:
    """The message of an error without its "provider: kind: " prefix."""
    text = str(error)
    prefix = f"{error.provider}: {error.kind}: "
    return text[len(prefix):] if text.startswith(prefix) else text
