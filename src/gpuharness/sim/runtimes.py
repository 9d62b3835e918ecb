"""Simulated runtimes on 127.0.0.1: ComfyUI-, OpenAI- (vLLM) and RunPod-Serverless-compatible HTTP servers
with the real wire shapes, and injectable faults. Each also answers in-process (`RuntimeServer.transport()`), the
fake of the runtime HTTP seam."""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Final, Literal, final
from urllib.parse import parse_qs, urlparse

import httpx

from gpuharness.core.comfy_catalog import NodeCatalog
from gpuharness.sim.comfyui import OOM_MESSAGE, ComfyFaults, SimComfyUI, png_bytes

RuntimeKind = Literal["comfyui", "openai", "serverless"]
JSON: Final[str] = "application/json"
DROPPED: Final[int] = 0  # a status meaning: close the connection without an answer
#: Small GETs of the ComfyUI frontend, as the recorded 0.8.0 server answered them.
RECORDED_GETS: Final[dict[str, Any]] = {
    "/features": {"supports_preview_metadata": True, "max_upload_size": 104857600,
                  "extension": {"manager": {"supports_v4": True}}},
    "/embeddings": [],
    "/extensions": ["/extensions/core/groupNode.js", "/extensions/core/clipspace.js",
                    "/extensions/core/widgetInputs.js"],
}
__all__ = ["OOM_MESSAGE", "RuntimeFaults", "RuntimeServer", "png_bytes"]


@final
@dataclass(frozen=True, slots=True)
class RuntimeFaults:
    """Faults a runtime can show. polls_before_done: how many /history (or /status) polls answer 'not yet'.
    ComfyUI: missing_node is a class whose custom node failed to import (absent from the catalog); missing_model
    hides the model files; corrupt_checkpoint makes the checkpoint loader raise SafetensorError; oom raises a
    CUDA OOM in the sampler."""

    oom: bool = False
    missing_node: str | None = None
    missing_model: bool = False
    corrupt_checkpoint: bool = False
    health_down: bool = False
    empty_output: bool = False
    never_finishes: bool = False
    wrong_model: bool = False
    polls_before_done: int = 1
    hostile_names: tuple[tuple[str, str], ...] = ()  # ComfyUI: see ComfyFaults.hostile_names

    def comfy(self) -> ComfyFaults:
        return ComfyFaults(oom=self.oom, missing_node=self.missing_node, missing_model=self.missing_model,
                           corrupt_checkpoint=self.corrupt_checkpoint, empty_output=self.empty_output,
                           never_finishes=self.never_finishes, polls_before_done=self.polls_before_done,
                           hostile_names=self.hostile_names)


@final
class RuntimeServer:
    """One runtime. `faults` may be replaced while it runs. A ComfyUI validates against `catalog` (the recorded
    ComfyUI 0.8.0 one by default) and lists the model files under `models_root` when given."""

    def __init__(self, kind: RuntimeKind, *, faults: RuntimeFaults | None = None,
                 model: str = "Qwen/Qwen2.5-0.5B-Instruct", output_root: Path | None = None,
                 models_root: Path | None = None, catalog: NodeCatalog | None = None,
                 gpu: tuple[str, int] = ("NVIDIA GeForce RTX 4090", 24564)) -> None:
        self.kind = kind
        self.faults = faults or RuntimeFaults()
        self.model = model
        self.output_root = output_root
        self.gpu = gpu
        self.comfyui = SimComfyUI(lambda: self.faults.comfy(), output_root=output_root, models_root=models_root,
                                  catalog=catalog)
        self.jobs: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0

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

    def respond(self, method: str, raw_path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any, str]:
        """The answer to one request: (status, JSON value or bytes, content type)."""
        path = raw_path[4:] if raw_path.startswith("/api/") else raw_path
        self.requests.append(f"{method} {path}")
        if self.kind == "serverless":
            return self._serverless(method, path, body)
        if self.faults.health_down:
            return 503, {"error": "unhealthy", "error_type": "healthcheck"}, JSON
        if self.kind == "comfyui":
            return self._comfyui(method, path, query, body)
        return self._openai(method, path, body)

    # --- ComfyUI
    def _comfyui(self, method: str, path: str, query: dict[str, list[str]], body: Any) -> tuple[int, Any, str]:
        comfy = self.comfyui
        if path == "/prompt":
            if method == "POST":
                return (*comfy.prompt(body), JSON)
            return 200, {"exec_info": {"queue_remaining": comfy.queue_remaining()}}, JSON
        if path == "/history" or path.startswith("/history/"):
            return 200, comfy.history(path[len("/history/"):] or None), JSON
        if path == "/view":
            status, data = comfy.view(query)
            return status, data, "image/png"
        if path == "/queue":
            if method == "POST":
                comfy.forget(body)
                return 200, b"", "text/plain"
            return 200, comfy.queue(), JSON
        if path == "/interrupt" and method == "POST":
            return 200, b"", "text/plain"
        if path == "/object_info" or path.startswith("/object_info/"):
            return 200, comfy.object_info(path[len("/object_info/"):] or None), JSON
        if path == "/system_stats":
            return 200, comfy.system_stats(*self.gpu), JSON
        if path in RECORDED_GETS:
            return 200, RECORDED_GETS[path], JSON
        return 404, b"404: Not Found", "text/plain"

    # --- OpenAI-compatible
    def completion(self, body: Any, *, chat: bool = False) -> tuple[int, Any]:
        """POST /v1/completions, or /v1/chat/completions with chat (vLLM's shapes)."""
        if self.faults.oom:
            return 500, {"object": "error", "message": "CUDA out of memory. Tried to allocate 2.00 GiB.",
                         "type": "InternalServerError", "param": None, "code": 500}
        model = body.get("model") if isinstance(body, dict) else None
        if model != self.model:
            return 404, {"object": "error", "message": f"The model `{model}` does not exist.",
                         "type": "NotFoundError", "param": None, "code": 404}
        text = "" if self.faults.empty_output else " world! This is a test."
        choice: dict[str, Any] = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length",
                                  "stop_reason": None, "prompt_logprobs": None}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text.strip(), "tool_calls": []},
                      "logprobs": None, "finish_reason": "length", "stop_reason": None}
        return 200, {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:16]}",
                     "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                     "model": model, "choices": [choice],
                     "usage": {"prompt_tokens": 1, "total_tokens": 9, "completion_tokens": 8,
                               "prompt_tokens_details": None}}

    def hold(self) -> bool:
        """never_finishes on an OpenAI-compatible runtime: the request hangs while the runtime runs (False once
        it stopped: the connection is then dropped unanswered)."""
        while self.faults.never_finishes:
            if self._server is None:
                return False
            time.sleep(0.02)
        return True

    def models(self) -> dict[str, Any]:
        name = "some-other/model" if self.faults.wrong_model else self.model
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 1724100000,
                                            "owned_by": "vllm", "root": name, "parent": None,
                                            "max_model_len": 32768}]}

    # --- RunPod Serverless
    def serverless_job(self, body: Any, *, sync: bool = True) -> dict[str, Any]:
        """POST /runsync (answers the job as it stands) or /run (always IN_QUEUE first)."""
        job_id = f"sync-{uuid.uuid4()}" if sync else str(uuid.uuid4())
        with self.lock:
            self.jobs[job_id] = {"input": (body or {}).get("input") if isinstance(body, dict) else None, "polls": 0}
        if not sync:
            return {"id": job_id, "status": "IN_QUEUE"}
        return self.serverless_status(job_id, first=True)

    def serverless_cancel(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                return {}
            job["cancelled"] = True
        return {"id": job_id, "status": "CANCELLED"}

    def serverless_status(self, job_id: str, *, first: bool = False) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                return {}
            if job.get("cancelled"):
                return {"id": job_id, "status": "CANCELLED"}
            if not first:
                job["polls"] += 1
            pending = self.faults.never_finishes or job["polls"] < self.faults.polls_before_done
        if pending:
            return {"id": job_id, "status": "IN_PROGRESS" if job["polls"] else "IN_QUEUE"}
        if self.faults.oom:
            error = json.dumps({"error_type": "<class 'torch.OutOfMemoryError'>",
                                "error_message": "CUDA out of memory. Tried to allocate 2.00 GiB.",
                                "error_traceback": "Traceback ...", "hostname": "sim", "worker_id": "w1"})
            return {"delayTime": 120, "error": error, "executionTime": 900, "id": job_id, "status": "FAILED",
                    "workerId": "w1"}
        output: Any = [] if self.faults.empty_output else [{"image": "https://example.invalid/out.png", "seed": 1}]
        return {"delayTime": 824, "executionTime": 3391, "id": job_id, "output": output, "status": "COMPLETED"}

    def _serverless(self, method: str, path: str, body: Any) -> tuple[int, Any, str]:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["v2"] and len(parts) >= 3:
            parts = parts[2:]  # /v2/<endpoint_id>/<op>
        op = parts[0] if parts else ""
        if op == "health":
            if self.faults.health_down:
                workers = {"idle": 0, "initializing": 0, "ready": 0, "running": 0, "throttled": 0, "unhealthy": 1}
                return 200, {"jobs": {"completed": 0, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0},
                             "workers": workers}, JSON
            return 200, {"jobs": {"completed": 27, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0},
                         "workers": {"idle": 1, "initializing": 0, "ready": 1, "running": 0, "throttled": 0,
                                     "unhealthy": 0}}, JSON
        if op in ("run", "runsync") and method == "POST":
            return 200, self.serverless_job(body, sync=op == "runsync"), JSON
        if op == "status" and len(parts) == 2:
            answer = self.serverless_status(parts[1])
            return (200, answer, JSON) if answer else (404, {"error": "request does not exist"}, JSON)
        if op == "cancel" and len(parts) == 2 and method == "POST":
            answer = self.serverless_cancel(parts[1])
            return (200, answer, JSON) if answer else (404, {"error": "request does not exist"}, JSON)
        return 404, {"error": "not found"}, JSON

    def _openai(self, method: str, path: str, body: Any) -> tuple[int, Any, str]:
        if path == "/health":
            return 200, b"", "text/plain"
        if path == "/v1/models":
            return 200, self.models(), JSON
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            if not self.hold():
                return DROPPED, b"", ""
            return (*self.completion(body, chat=path == "/v1/chat/completions"), JSON)
        return 404, {"error": {"message": "Not Found", "type": "NotFoundError", "param": None, "code": 404}}, JSON


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
