"""What clients sent the simulator: each provider request as it arrived, for comparing one client with another."""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core import secrets
from gpuharness.core.json_fields import JsonFields

#: enough for any one test's comparison; older requests fall off
KEEP = 10_000
#: headers that say how a client speaks (a credential header's scheme only: core.secrets names them)
KEPT_HEADERS = ("authorization", "content-type", "accept", "user-agent")


@final
@dataclass(frozen=True, slots=True)
class RecordedRequest(JsonFields):
    """One provider request: method, path, decoded query, the headers that matter, the JSON body."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any = None
    route: str | None = None


def kept_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The headers worth comparing, with a credential reduced to its scheme ("Bearer ***")."""
    kept = {name: headers[name] for name in KEPT_HEADERS if name in headers}
    for name, value in kept.items():
        if name in secrets.CREDENTIAL_HEADERS:
            scheme, _, rest = value.partition(" ")
            kept[name] = f"{scheme} ***" if rest else "***"
    return kept


def kept_query(params: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The query with any key-bearing parameter (core.secrets.SECRET_PARAMS: api_key, token, key, ...) masked."""
    return {name: ["***"] * len(values) if secrets.secret_param(name) else list(values)
            for name, values in params.items()}


@final
class RequestLog:
    """The last KEEP provider requests, thread-safe."""

    __slots__ = ("_lock", "_requests")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: deque[RecordedRequest] = deque(maxlen=KEEP)

    def add(self, request: RecordedRequest) -> None:
        """Keep one request (the oldest falls off past KEEP)."""
        with self._lock:
            self._requests.append(request)

    def all(self) -> list[RecordedRequest]:
        """The kept requests, oldest first."""
        with self._lock:
            return list(self._requests)

    def clear(self) -> None:
        """Forget every kept request."""
        with self._lock:
            self._requests.clear()
