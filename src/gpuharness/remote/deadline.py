"""Answers from outside over HTTP (a provider's, a runtime's) are bounded: in time by the phase deadline, in size by
a cap on their (decoded) bytes. httpx's timeouts are per read: a peer that drips one byte every few seconds never
trips them, so a read could outlive any phase, and httpx holds whatever body comes. Here each connect, read and write
waits at most until the phase deadline (`DeadlineTransport`), and `read_answer` streams the answer, refusing it past
its deadline or its cap (an httpx TransportError naming which), so a request ends by its deadline however the peer
behaves, holding at most the cap. The JSON in an answer is parsed by `core.json_text.loads_outside` (depth bound).

The one HTTP seam (`remote.http.PhaseHttp`) reads every answer so, a provider's and a runtime's alike.

| answer | cap |
|---|---|
| a provider's (`ProviderHttp`, over the seam) and a runtime's (the seam itself) | 64 MiB, `MAX_ANSWER_BYTES` |
| a runtime's output file (ComfyUI `/view`) | 2 GiB, `MAX_OUTPUT_BYTES` |
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, final

import httpcore
import httpx

from gpuharness.core.errors import GpuharnessError
from gpuharness.core.regular_file import size_words

MAX_ANSWER_BYTES: Final = 64 << 20
MAX_OUTPUT_BYTES: Final = 2 << 30
#: headers that describe the bytes on the wire, not the decoded body an answer is rebuilt with
_WIRE_HEADERS: Final = frozenset({b"content-encoding", b"content-length", b"transfer-encoding"})
#: a socket wait cut at the deadline may wake a hair before it
_EARLY_S: Final = 0.05

#: seconds left until the phase deadline (<= 0: passed)
Remaining = Callable[[], float]


def _bounded(timeout: float | None, remaining: Remaining, error: type[Exception]) -> float:
    left = remaining()
    if left <= 0:
        raise error("the phase deadline has passed")
    return left if timeout is None else min(timeout, left)


@final
class _DeadlineStream(httpcore.NetworkStream):
    """A network stream whose every wait is cut at the phase deadline."""

    def __init__(self, stream: httpcore.NetworkStream, remaining: Remaining) -> None:
        self._stream = stream
        self._remaining = remaining

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._stream.read(max_bytes, _bounded(timeout, self._remaining, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._stream.write(buffer, _bounded(timeout, self._remaining, httpcore.WriteTimeout))

    def close(self) -> None:
        self._stream.close()

    def start_tls(self, ssl_context: ssl.SSLContext, server_hostname: str | None = None,
                  timeout: float | None = None) -> httpcore.NetworkStream:
        upgraded = self._stream.start_tls(ssl_context, server_hostname,
                                          _bounded(timeout, self._remaining, httpcore.ConnectTimeout))
        return _DeadlineStream(upgraded, self._remaining)

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


@final
class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's own sync backend, with every stream it opens bounded by the phase deadline."""

    def __init__(self, remaining: Remaining) -> None:
        self._inner = httpcore.SyncBackend()
        self._remaining = remaining

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, local_address: str | None = None,
                    socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _bounded(timeout, self._remaining, httpcore.ConnectTimeout),
                                         local_address, socket_options)
        return _DeadlineStream(stream, self._remaining)

    def connect_unix_socket(self, path: str, timeout: float | None = None,
                            socket_options: Iterable[Any] | None = None) -> httpcore.NetworkStream:
        stream = self._inner.connect_unix_socket(path, _bounded(timeout, self._remaining, httpcore.ConnectTimeout),
                                                 socket_options)
        return _DeadlineStream(stream, self._remaining)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


@final
class DeadlineTransport(httpx.HTTPTransport):
    """httpx's HTTP transport (so cassettes patch it as any other), over a connection pool whose sockets never
    wait past the phase deadline."""

    def __init__(self, remaining: Remaining) -> None:
        super().__init__()
        # httpx takes no network backend; its pool is rebuilt with the same defaults and the bounded backend
        self._pool = httpcore.ConnectionPool(ssl_context=httpx.create_ssl_context(),
                                             network_backend=_DeadlineBackend(remaining))


class AnswerTooLarge(GpuharnessError, httpx.ReadError):
    """An answer over its cap: refused as soon as the cap is passed, never held whole."""


class AnswerPastDeadline(GpuharnessError, httpx.ReadTimeout):
    """An answer still arriving when its deadline passed (a drip): cut off there."""


def read_answer(client: httpx.Client, method: str, url: str, *, deadline: float, max_bytes: int = MAX_ANSWER_BYTES,
                monotonic: Callable[[], float] = time.monotonic, **kwargs: Any) -> httpx.Response:
    """Send one request and read its whole answer by `deadline` (a `monotonic` time) and under max_bytes (decoded);
    the answer is returned read, as `client.request` returns it. Past either bound: AnswerPastDeadline or
    AnswerTooLarge (httpx TransportErrors), naming the request and the bound."""
    try:
        return _read_answer(client, method, url, deadline, max_bytes, monotonic, **kwargs)
    except httpx.TimeoutException as exc:
        if isinstance(exc, AnswerPastDeadline) or monotonic() < deadline - _EARLY_S:
            raise  # a timeout of its own (connect, a per-read timeout shorter than the deadline)
        raise AnswerPastDeadline(f"{method} {url}: no complete answer by its deadline ({type(exc).__name__}: "
                                 f"{exc}; cut off)", request=getattr(exc, "_request", None)) from None


def _read_answer(client: httpx.Client, method: str, url: str, deadline: float, max_bytes: int,
                 monotonic: Callable[[], float], **kwargs: Any) -> httpx.Response:
    with client.stream(method, url, **kwargs) as response:
        chunks: list[bytes] = []
        total = 0
        for chunk in response.iter_bytes():
            total += len(chunk)
            if total > max_bytes:
                raise AnswerTooLarge(f"{method} {url}: the answer is over the {size_words(max_bytes)} cap of one "
                                     "answer (cut off)", request=response.request)
            if monotonic() > deadline:
                raise AnswerPastDeadline(f"{method} {url}: the answer was still arriving at its deadline "
                                         f"({size_words(total)} so far; cut off)", request=response.request)
            chunks.append(chunk)
    headers = [(name, value) for name, value in response.headers.raw if name.lower() not in _WIRE_HEADERS]
    return httpx.Response(response.status_code, headers=headers, content=b"".join(chunks),
                          request=response.request, extensions=response.extensions)
