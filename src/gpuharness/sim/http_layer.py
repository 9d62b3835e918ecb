"""The simulator's HTTP layer: read a request (refusing what cannot be read), hand it over, write the answer."""

from __future__ import annotations

import io
import json
import time
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

from gpuharness.core.secrets import mask_query
from gpuharness.sim.routing import SimRequest, SimResponse, json_response

#: the most a request body may be (RunPod's /runsync takes up to 20 MB)
MAX_BODY = 20 * 1024 * 1024


class Answering(Protocol):
    """What the HTTP layer needs from the simulator."""

    log: Callable[[str], None] | None

    def handle(self, req: SimRequest) -> SimResponse: ...

    def refuse(self, path: str, reason: str) -> SimResponse: ...


class SimHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server on loopback whose requests the simulator answers."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], sim: Answering) -> None:
        self.sim = sim
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # headers and body leave in one write (flushed by handle_one_request): no Nagle/delayed-ACK stalls
    wbufsize = 1 << 16
    disable_nagle_algorithm = True
    server: SimHTTPServer

    def do_GET(self) -> None:
        self._dispatch()

    def do_POST(self) -> None:
        self._dispatch()

    def do_PUT(self) -> None:
        self._dispatch()

    def do_DELETE(self) -> None:
        self._dispatch()

    def do_PATCH(self) -> None:
        self._dispatch()

    def _dispatch(self) -> None:
        parts = urlsplit(self.path)
        sim = self.server.sim
        body = self._body(parts.path)
        if isinstance(body, SimResponse):
            self._send(body)
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        req = SimRequest(self.command, parts.path, parse_qs(parts.query, keep_blank_values=True), headers, body)
        try:
            response = sim.handle(req)
        except Exception as exc:  # a simulator (or host_factory) bug must not hang the client
            response = json_response(500, {"error": f"simulator failure: {type(exc).__name__}: {exc}"})
            if sim.log is not None:
                sim.log(f"simulator failure on {self.command} {parts.path}: {type(exc).__name__}: {exc}")
        if response.drop:
            # the mutation is committed; the client never hears back
            self.close_connection = True
            return
        self._send(response)

    def _body(self, path: str) -> Any:
        """The JSON body (None when empty), or the 400/411/413 answer when it cannot be read as one."""
        sim = self.server.sim
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            return _with_status(sim.refuse(path, "chunked bodies are not supported: send Content-Length"), 411)
        declared = self.headers.get("Content-Length", "0").strip()
        if not declared.isdigit():
            # the body's end is unknown: answer, then close the connection
            self.close_connection = True
            return sim.refuse(path, f"Content-Length must be a non-negative integer, got {declared[:40]!r}")
        length = int(declared)
        if length > MAX_BODY:
            self.close_connection = True
            return _with_status(sim.refuse(path, f"body of {length} bytes is over the {MAX_BODY}-byte limit"),
                                413)
        raw = self.rfile.read(length) if length else b""
        if len(raw) < length:
            self.close_connection = True
            return sim.refuse(path, f"body ended after {len(raw)} of {length} bytes")
        if not raw.strip():
            return None
        try:
            return json.loads(raw, parse_constant=_no_constant)
        except ValueError as exc:
            return sim.refuse(path, f"request body is not JSON: {str(exc).splitlines()[0][:120]}")

    def _send(self, response: SimResponse) -> None:
        if response.drip_s > 0:
            self._drip(response)
            return
        data = response.encode()
        self.send_response(response.status)
        if response.status != 204:
            self.send_header("Content-Type", response.content_type)
            self.send_header("Content-Length", str(len(data)))
        for name, value in response.headers.items():
            self.send_header(name, value)
        self.end_headers()
        if data and response.status != 204:
            self.wfile.write(data)

    def _drip(self, response: SimResponse) -> None:
        """The whole answer, one byte every drip_s seconds, until it ends or the client hangs up."""
        wire, self.wfile = self.wfile, io.BytesIO()
        try:
            self._send(replace(response, drip_s=0.0))
            raw = self.wfile.getvalue()
        finally:
            self.wfile = wire
        self.close_connection = True
        for index in range(len(raw)):
            try:
                wire.write(raw[index:index + 1])
                wire.flush()
            except OSError:
                return
            time.sleep(response.drip_s)

    def log_message(self, format: str, *args: Any) -> None:
        log = self.server.sim.log
        if log is not None:
            # the request line only: never headers, so never a key
            line = mask_query(format % args, "***")
            log(f"{self.address_string()} {line}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _with_status(response: SimResponse, status: int) -> SimResponse:
    response.status = status
    return response
