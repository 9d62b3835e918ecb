"""A phase deadline on every socket wait of a provider client. httpx's timeouts are per read: a peer that drips
one byte every few seconds never trips them, so a read could outlive any phase. Here each connect, read and write
waits at most until the phase deadline, so a request ends by it however the peer behaves."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterable
from typing import Any, final

import httpcore
import httpx

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
