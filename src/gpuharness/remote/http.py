"""The one HTTP seam: a client to one endpoint (a provider's API, ComfyUI, an OpenAI-compatible server, a RunPod
Serverless endpoint) for one phase, carrying that phase's deadline, in the spirit of httpx's `BaseTransport`: every
exchange goes through `PhaseHttp.request` (or `download`, for a file). Runtime clients speak through it directly;
a provider's client (`providers.transport.ProviderHttp`) adds its retry policy and error classes on top.

Every answer is bounded (remote.deadline): a request's `timeout` is a wall-clock deadline on the whole answer, within
the phase deadline when the seam has one, never a per-read timeout a drip defeats; every socket wait is cut there
(`DeadlineTransport`), and an answer is read under its byte cap. Its fake is an httpx transport (the simulator's
runtimes answer in-process, `RuntimeServer.transport()`; respx mocks a provider's), and cassettes record it as any
httpx client (providers.cassette): the transport stays httpx's."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any, final

import httpx

from gpuharness.core.json_text import loads_outside
from gpuharness.remote.deadline import MAX_ANSWER_BYTES, AnswerPastDeadline, DeadlineTransport, read_answer

DEFAULT_TIMEOUT_S = 30.0
#: a connection is made within this, or the request's timeout when shorter
CONNECT_S = 10.0

Monotonic = Callable[[], float]


@final
@dataclass(frozen=True, slots=True)
class CallRecord:
    """One exchange as the client saw it (no headers, no bodies: nothing secret); a provider's retried read
    numbers its attempts and the seconds waited before each."""

    method: str
    path: str
    status: int | None
    error: str | None = None
    attempt: int = 1
    waited_s: float = 0.0


@final
@dataclass(frozen=True, slots=True)
class Download:
    """A file as GET answered it: status, Content-Type, and its body up to the limit asked for (plus one byte)."""

    status: int
    content_type: str | None
    data: bytes


@final
class PhaseHttp:
    """An HTTP client to one endpoint for one phase. Transport errors propagate as httpx errors (a cut-off answer
    as AnswerPastDeadline or AnswerTooLarge, which are httpx TransportErrors): each caller turns them into its own
    outcome (unreachable, timeout, an unknown job outcome, a provider's network error)."""

    __slots__ = ("_client", "_monotonic", "_owned", "_phase_end", "_until", "base_url", "calls", "timeout_s")

    def __init__(self, base_url: str | None = None, *, headers: Mapping[str, str] | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S, deadline_s: float | None = None,
                 transport: httpx.BaseTransport | None = None, client: httpx.Client | None = None,
                 monotonic: Monotonic = time.monotonic) -> None:
        self._monotonic = monotonic
        self._phase_end = None if deadline_s is None else monotonic() + deadline_s
        self._until = self._phase_end if self._phase_end is not None else monotonic() + timeout_s
        self._owned = client is None
        if client is None:
            if not base_url:
                raise ValueError("an HTTP client needs the endpoint's base URL")
            # the sockets never wait past the current request's deadline (httpx's timeouts are per read)
            client = httpx.Client(base_url=base_url, headers=dict(headers or {}),
                                  transport=transport or DeadlineTransport(self.remaining),
                                  timeout=_timeout(timeout_s), follow_redirects=False)
        self._client = client
        self.timeout_s = timeout_s
        self.base_url = str(client.base_url)
        self.calls: list[CallRecord] = []

    @classmethod
    def over(cls, client: httpx.Client | PhaseHttp, *, deadline_s: float | None = None) -> PhaseHttp:
        """The seam over a client someone else owns and closes (the health suite's recorded one)."""
        if isinstance(client, PhaseHttp):
            return client
        timeout = client.timeout.read
        return cls(client=client, deadline_s=deadline_s,
                   timeout_s=DEFAULT_TIMEOUT_S if timeout is None else float(timeout))

    def remaining(self) -> float:
        """Seconds left until the current request's deadline (its timeout, within the phase deadline)."""
        return self._until - self._monotonic()

    def phase_left(self) -> float | None:
        """Seconds left until the phase deadline (None: the seam has none, only each request's timeout)."""
        return None if self._phase_end is None else self._phase_end - self._monotonic()

    def get(self, path: str, *, params: Mapping[str, Any] | None = None, timeout: float | None = None,
            max_bytes: int = MAX_ANSWER_BYTES) -> httpx.Response:
        return self.request("GET", path, params=params, timeout=timeout, max_bytes=max_bytes)

    def post(self, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
             timeout: float | None = None) -> httpx.Response:
        return self.request("POST", path, json=json, params=params, timeout=timeout)

    def request(self, method: str, path: str, *, json: Any = None, params: Mapping[str, Any] | None = None,
                timeout: float | None = None, max_bytes: int = MAX_ANSWER_BYTES, attempt: int = 1,
                waited_s: float = 0.0) -> httpx.Response:
        """One exchange; its whole answer by `timeout` seconds (the seam's timeout_s by default) and the phase
        deadline, under max_bytes: past either, an httpx TransportError (AnswerPastDeadline, AnswerTooLarge)."""
        seconds = self._start(timeout)
        try:
            if self._until <= self._monotonic():
                raise httpx.ReadTimeout(f"{method} {path}: the phase deadline has passed")
            response = read_answer(self._client, method, path, deadline=self._until, max_bytes=max_bytes,
                                   monotonic=self._monotonic, json=json, params=params, timeout=_timeout(seconds))
        except httpx.HTTPError as exc:
            self.calls.append(CallRecord(method, path, None, type(exc).__name__, attempt, waited_s))
            raise
        self.calls.append(CallRecord(method, path, response.status_code, None, attempt, waited_s))
        return response

    def download(self, path: str, *, params: Mapping[str, Any] | None = None, limit: int,
                 timeout: float | None = None) -> Download:
        """GET a file, reading at most `limit` + 1 bytes of its body (decoded, so a compressed body is counted as
        what it becomes): one byte more than `limit` says the file is longer, and the rest is never read. The whole
        body arrives by `timeout` seconds (the seam's timeout_s by default) and the phase deadline, as `request`'s."""
        seconds = self._start(timeout)
        data = bytearray()
        try:
            if self._until <= self._monotonic():
                raise httpx.ReadTimeout(f"GET {path}: the phase deadline has passed")
            with self._client.stream("GET", path, params=params, timeout=_timeout(seconds)) as response:
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > limit:
                        break
                    if self._monotonic() > self._until:
                        raise AnswerPastDeadline(f"GET {path}: the file was still arriving at its deadline "
                                                 f"({len(data)} bytes so far; cut off)", request=response.request)
        except httpx.HTTPError as exc:
            self.calls.append(CallRecord("GET", path, None, type(exc).__name__))
            raise
        self.calls.append(CallRecord("GET", path, response.status_code))
        return Download(response.status_code, response.headers.get("content-type"), bytes(data[:limit + 1]))

    def count(self, method: str | None = None, path_prefix: str = "") -> int:
        """How many exchanges (attempts) this client made, optionally filtered."""
        return sum(1 for c in self.calls if (method is None or c.method == method) and c.path.startswith(path_prefix))

    def close(self) -> None:
        if self._owned:
            self._client.close()

    def __enter__(self) -> PhaseHttp:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _start(self, timeout: float | None) -> float:
        """Begin a request of `timeout` seconds (the seam's by default): its deadline, within the phase's."""
        seconds = self.timeout_s if timeout is None else timeout
        until = self._monotonic() + seconds
        self._until = until if self._phase_end is None else min(until, self._phase_end)
        return seconds


def _timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_S))


def answer_json(response: httpx.Response) -> Any:
    """An answer's JSON, parsed under core.json_text's depth bound (its bytes are capped by the seam); a ValueError
    (as httpx's .json() raises) when it is not JSON or nests too deeply."""
    return loads_outside(response.content, what=answer_of(response))


def answer_of(response: httpx.Response) -> str:
    """`METHOD /path` of the request an answer is to (`the answer` for one made without a request)."""
    try:
        request = response.request
    except RuntimeError:
        return "the answer"
    return f"{request.method} {request.url.path}"
