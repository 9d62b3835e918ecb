"""Simulated runtimes on 127.0.0.1: one HTTP server per runtime, answering with that runtime's simulator half
(sim/simulated_runtime.py: ComfyUI's, the OpenAI-compatible (vLLM) one, RunPod Serverless's, each in its own module
sim/<runtime>.py), with the real wire shapes and injectable faults. Each also answers in-process
(`RuntimeServer.transport()`), the fake of the runtime HTTP seam."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, final
from urllib.parse import parse_qs, urlparse

import httpx

from gpuharness.runtimes.comfyui.catalog import NodeCatalog
from gpuharness.sim.catalog import DEFAULT_GPU
from gpuharness.sim.simulated_runtime import DROPPED, JSON, Answer, RuntimeFaults, RuntimeSetting, simulated

__all__ = ["RuntimeFaults", "RuntimeServer"]


@final
class RuntimeServer:
    """One runtime of the table, answering as its simulator half does. `faults` may be replaced while it runs. A
    ComfyUI validates against `catalog` (the recorded ComfyUI 0.8.0 one by default) and lists the model files under
    `models_root` when given; an OpenAI-compatible runtime serves `model`."""

    def __init__(self, kind: str, *, faults: RuntimeFaults | None = None,
                 model: str = "Qwen/Qwen2.5-0.5B-Instruct", output_root: Path | None = None,
                 models_root: Path | None = None, catalog: NodeCatalog | None = None,
                 gpu: tuple[str, int] = (DEFAULT_GPU.name, DEFAULT_GPU.memory_mib)) -> None:
        self.kind = kind
        self.faults = faults or RuntimeFaults()
        self.model = model
        self.output_root = output_root
        self.gpu = gpu
        self.requests: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.behaviour = simulated(kind).behaviour(RuntimeSetting(
            faults=lambda: self.faults, running=lambda: self._server is not None, model=model,
            output_root=output_root, models_root=models_root, catalog=catalog, gpu=gpu))

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> RuntimeServer:
        runtime = self

        class Handler(_Handler):
            server_runtime = runtime

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def transport(self) -> httpx.BaseTransport:
        """This runtime in-process, as an httpx transport: the fake for the runtime HTTP seam (no socket)."""
        return httpx.MockTransport(self._answer)

    def _answer(self, request: httpx.Request) -> httpx.Response:
        try:
            body = json.loads(request.content) if request.content else None
        except ValueError:
            body = None
        query = parse_qs(request.url.query.decode(), keep_blank_values=True)
        status, answer, content_type = self.respond(request.method, request.url.path, query, body)
        if status == DROPPED:
            raise httpx.RemoteProtocolError("Server disconnected without sending a response.", request=request)
        data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        return httpx.Response(status, content=data, headers={"Content-Type": content_type})

    def respond(self, method: str, raw_path: str, query: dict[str, list[str]], body: Any) -> Answer:
        """The answer to one request: (status, JSON value or bytes, content type)."""
        path = raw_path[4:] if raw_path.startswith("/api/") else raw_path
        self.requests.append(f"{method} {path}")
        return self.behaviour.respond(method, path, query, body)


class _Handler(BaseHTTPRequestHandler):
    server_runtime: RuntimeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: Any, content_type: str = JSON) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _body(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            return json.loads(raw) if raw else None
        except json.JSONDecodeError:
            return None

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def _route(self, method: str) -> None:
        url = urlparse(self.path)
        body = self._body() if method == "POST" else None
        status, answer, content_type = self.server_runtime.respond(
            method, url.path, parse_qs(url.query, keep_blank_values=True), body)
        if status == DROPPED:
            return  # the runtime stopped while the request hung: the connection goes unanswered
        self._send(status, answer, content_type)
