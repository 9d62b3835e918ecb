"""Injected faults: a queue per provider, consumed by the requests they apply to."""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any, Literal, final, get_args

FaultName = Literal["rate_limit", "capacity", "drop_after_commit", "hold_after_commit", "server_error", "latency",
                    "balance", "drip"]
RequestKind = Literal["read", "launch", "mutation", "control"]

FAULTS: tuple[str, ...] = get_args(FaultName)
#: bounds that keep an armed fault from hanging the simulator (a day of Retry-After, a minute of latency)
MAX_RETRY_AFTER_S = 86_400
MAX_LATENCY_MS = 60_000

#: which kinds of request each fault hits: capacity only refuses launches, a dropped response needs a mutation
APPLIES_TO: dict[str, tuple[RequestKind, ...]] = {
    "rate_limit": ("read", "launch", "mutation"),
    "server_error": ("read", "launch", "mutation"),
    "latency": ("read", "launch", "mutation"),
    # the answer leaves one byte every latency_ms: never a read timeout, never an end (the phase deadline's case)
    "drip": ("read", "launch", "mutation"),
    "capacity": ("launch",),
    "drop_after_commit": ("launch", "mutation"),
    # the mutation is committed, then its answer waits latency_ms: a client killed meanwhile never records it
    "hold_after_commit": ("launch", "mutation"),
    "balance": ("launch",),
}


@final
@dataclass(slots=True)
class Fault:
    """One armed fault; `count` requests will suffer it (-1: until cleared)."""

    provider: str
    fault: FaultName
    count: int = 1
    retry_after: float | None = None
    latency_ms: int = 0
    route: str | None = None

    def matches(self, provider: str, kind: RequestKind, route: str) -> bool:
        if self.provider not in (provider, "*") or kind not in APPLIES_TO[self.fault]:
            return False
        return self.route is None or self.route in route


def parse_fault(body: Any) -> Fault:
    """Validate a POST /_sim/faults body; ValueError with a readable message when wrong."""
    if not isinstance(body, dict):
        raise ValueError("expected a JSON object")
    provider = body.get("provider")
    fault = body.get("fault")
    if not isinstance(provider, str) or not provider:
        raise ValueError("'provider' must be a provider name (runpod, runpod-serverless, vast, massed) or '*'")
    if fault not in FAULTS:
        raise ValueError(f"'fault' must be one of {list(FAULTS)}")
    count = body.get("count", 1)
    if not whole_number(count) or count == 0 or count < -1:
        raise ValueError("'count' must be a positive integer (or -1 for every request)")
    retry_after = body.get("retry_after")
    if retry_after is not None and not seconds(retry_after, MAX_RETRY_AFTER_S):
        raise ValueError(f"'retry_after' must be a number of seconds from 0 to {MAX_RETRY_AFTER_S}")
    latency_ms = body.get("latency_ms", 0)
    if not whole_number(latency_ms) or not 0 <= latency_ms <= MAX_LATENCY_MS:
        raise ValueError(f"'latency_ms' must be an integer from 0 to {MAX_LATENCY_MS}")
    route = body.get("route")
    if route is not None and not isinstance(route, str):
        raise ValueError("'route' must be a string")
    return Fault(provider, fault, count, None if retry_after is None else float(retry_after), latency_ms, route)


def whole_number(value: Any) -> bool:
    """An int that is not a bool (JSON true would otherwise count as 1)."""
    return isinstance(value, int) and not isinstance(value, bool)


def seconds(value: Any, most: float) -> bool:
    """A finite number of seconds from 0 to most (NaN and infinities are refused)."""
    return (isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            and 0 <= value <= most)


@final
class FaultPlan:
    """The armed faults, in the order they were armed. Thread-safe."""

    __slots__ = ("_faults", "_lock", "fired")

    def __init__(self) -> None:
        self._faults: list[Fault] = []
        self._lock = threading.Lock()
        self.fired: dict[str, int] = {}

    def arm(self, fault: Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()

    def take(self, provider: str, kind: RequestKind, route: str) -> list[Fault]:
        """The faults this request suffers: at most one latency fault plus one other, each consumed once."""
        taken: list[Fault] = []
        with self._lock:
            for want_latency in (True, False):
                for fault in self._faults:
                    if (fault.fault == "latency") == want_latency and fault.matches(provider, kind, route):
                        taken.append(fault)
                        if fault.count > 0:
                            fault.count -= 1
                        self.fired[fault.fault] = self.fired.get(fault.fault, 0) + 1
                        break
            self._faults = [f for f in self._faults if f.count != 0]
        return taken

    def armed(self) -> list[dict[str, Any]]:
        with self._lock:
            return [{"provider": f.provider, "fault": f.fault, "count": f.count, "retry_after": f.retry_after,
                     "latency_ms": f.latency_ms, "route": f.route} for f in self._faults]
