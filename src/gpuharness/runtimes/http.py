"""The runtime HTTP seam: one client to one runtime endpoint (ComfyUI, an OpenAI-compatible server, a RunPod
Serverless endpoint) for one phase. Every runtime client speaks through it; its fake is an httpx transport (the
simulator's runtimes answer in-process: `RuntimeServer.transport()`), as provider HTTP takes one."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, final

import httpx

DEFAULT_TIMEOUT_S = 30.0


@final
@dataclass(frozen=True, slots=True)
class RuntimeCall:
    """One exchange as the client saw it (no headers, no bodies: nothing secret)."""

    method: str
    path: str
    status: int | None
    error: str | None = None


@final
@dataclass(frozen=True, slots=True)
class Download:
    """A file as GET answered it: status, Content-Type, and its body up to the limit asked for (plus one byte)."""

    status: int
    content_type: str | None
    data: bytes


@final
class RuntimeHttp:
    """An HTTP client to one runtime endpoint. Transport errors propagate as httpx errors: each runtime client
    turns them into its own outcome (unreachable, timeout, an unknown job outcome)."""

    __slots__ = ("_client", "_owned", "base_url", "calls")

    def __init__(self, base_url: str | None = None, *, headers: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, transport: httpx.BaseTransport | None = None,
                 client: httpx.Client | None = None) -> None:
        created = client is None
        if client is None:
            if not base_url:
                raise ValueError("a runtime client needs the endpoint's base URL")
            client = httpx.Client(base_url=base_url, headers=dict(headers or {}), transport=transport,
                                  timeout=httpx.Timeout(timeout_s, connect=min(timeout_s, 10.0)),
                                  follow_redirects=False)
        self._client = client
        self._owned = created
        self.base_url = str(client.base_url)
        self.calls: list[RuntimeCall] = []

    @classmethod
    def over(cls, client: httpx.Client | RuntimeHttp) -> RuntimeHttp:
        """The seam over a client someone else owns and closes (the health suite's recorded one)."""
        if isinstance(client, RuntimeHttp):
            return client
        return cls(client=client)

    def get(self, path: str, *, params: Mapping[str, Any] | None = None,
            timeout: float | None = None) -> httpx.Response:
        return self.request("GET", path, params=params, timeout=timeout)

    def post(self, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
             timeout: float | None = None) -> httpx.Response:
        return self.request("POST", path, json=json, params=params, timeout=timeout)

    def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
                timeout: float | None = None) -> httpx.Response:
        extra: dict[str, Any] = {}
        if timeout is not None:
            extra["timeout"] = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        try:
            response = self._client.request(method, path, json=json, params=params, **extra)
        except httpx.HTTPError as exc:
            self.calls.append(RuntimeCall(method, path, None, type(exc).__name__))
            raise
        self.calls.append(RuntimeCall(method, path, response.status_code))
        return response

    def download(self, path: str, *, params: Mapping[str, Any] | None = None, limit: int,
                 timeout: float | None = None) -> Download:
        """GET a file, reading at most `limit` + 1 bytes of its body (decoded, so a compressed body is counted as
        what it becomes): one byte more than `limit` says the file is longer, and the rest is never read."""
        extra: dict[str, Any] = {}
        if timeout is not None:
            extra["timeout"] = httpx.Timeout(timeout, connect=min(timeout, 10.0))
        data = bytearray()
        try:
            with self._client.stream("GET", path, params=params, **extra) as response:
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > limit:
                        break
        except httpx.HTTPError as exc:
            self.calls.append(RuntimeCall("GET", path, None, type(exc).__name__))
            raise
        self.calls.append(RuntimeCall("GET", path, response.status_code))
        return Download(response.status_code, response.headers.get("content-type"), bytes(data[:limit + 1]))

    def count(self, method: str | None = None, path_prefix: str = "") -> int:
        return sum(1 for c in self.calls if (method is None or c.method == method) and c.path.startswith(path_prefix))

    def close(self) -> None:
        if self._owned:
            self._client.close()

    def __enter__(self) -> RuntimeHttp:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
