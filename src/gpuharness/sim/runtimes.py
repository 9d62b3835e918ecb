"""Simulated runtimes on 127.0.0.1: ComfyUI-, OpenAI- (vLLM) and RunPod-Serverless-compatible HTTP servers
with the real wire shapes, and injectable faults."""

from __future__ import annotations

import json
import struct
import threading
import time
import uuid
import zlib
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, final
from urllib.parse import parse_qs, urlparse

RuntimeKind = Literal["comfyui", "openai", "serverless"]

OOM_MESSAGE = ("Allocation on device \nThis error means you ran out of memory on your GPU.\n\nTIPS: If the workflow "
               "worked before you might have accidentally set the batch_size to a large number.")


@final
@dataclass(frozen=True, slots=True)
class RuntimeFaults:
    """Faults a runtime can show. polls_before_done: how many /history (or /status) polls answer 'not yet'."""

    oom: bool = False
    missing_node: str | None = None
    health_down: bool = False
    empty_output: bool = False
    never_finishes: bool = False
    wrong_model: bool = False
    polls_before_done: int = 1


def png_bytes(width: int = 8, height: int = 8, comment: str = "") -> bytes:
    """A small valid PNG (grey square); a comment (the prompt, say) makes each output's bytes its own."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + (chunk(b"tEXt", b"Comment\x00" + comment.encode("latin-1", "replace")) if comment else b"")
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


@final
class RuntimeServer:
    """One runtime. `faults` may be replaced while it runs."""

    def __init__(self, kind: RuntimeKind, *, faults: RuntimeFaults | None = None,
                 model: str = "Qwen/Qwen2.5-0.5B-Instruct", output_root: Path | None = None) -> None:
        self.kind = kind
        self.faults = faults or RuntimeFaults()
        self.model = model
        self.output_root = output_root
        self.jobs: dict[str, dict[str, Any]] = {}
        self.requests: list[str] = []
        self.lock = threading.Lock()
        self._counter = 0
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

    # --- ComfyUI
    def comfy_prompt(self, body: Any) -> tuple[int, Any]:
        graph = body.get("prompt") if isinstance(body, dict) else None
        if not isinstance(graph, dict) or not graph:
            return 400, {"error": {"type": "no_prompt", "message": "No prompt provided", "details": "",
                                   "extra_info": {}}, "node_errors": {}}
        missing = self.faults.missing_node
        if missing:
            node_id = next(iter(graph))
            return 400, {"error": {"type": "missing_node_type",
                                   "message": f"Node '{missing.split('_')[0]}' not found. The custom node may not "
                                              "be installed.",
                                   "details": f"Node ID '#{node_id}'",
                                   "extra_info": {"node_id": node_id, "class_type": missing,
                                                  "node_title": missing.split("_")[0]}}, "node_errors": {}}
        with self.lock:
            self._counter += 1
            prompt_id = str(body.get("prompt_id") or uuid.uuid4())
            self.jobs[prompt_id] = {"graph": graph, "polls": 0, "number": self._counter,
                                    "client_id": body.get("client_id")}
        return 200, {"prompt_id": prompt_id, "number": self._counter, "node_errors": {}}

    def comfy_history(self, prompt_id: str) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(prompt_id)
            if job is None:
                return {}
            job["polls"] += 1
            if self.faults.never_finishes or job["polls"] <= self.faults.polls_before_done:
                return {}
        graph = job["graph"]
        save_nodes = [node_id for node_id, node in graph.items()
                      if isinstance(node, dict) and "Save" in str(node.get("class_type", ""))] or [next(iter(graph))]
        started = int(time.time() * 1000)
        entry: dict[str, Any] = {"prompt": [job["number"], prompt_id, graph, {"client_id": job["client_id"]},
                                            save_nodes], "meta": {}}
        if self.faults.oom:
            node_id = save_nodes[0]
            entry["outputs"] = {}
            entry["status"] = {"status_str": "error", "completed": False, "messages": [
                ["execution_start", {"prompt_id": prompt_id, "timestamp": started}],
                ["execution_error", {"prompt_id": prompt_id, "node_id": "3", "node_type": "KSampler",
                                     "executed": [], "exception_message": OOM_MESSAGE,
                                     "exception_type": "torch.OutOfMemoryError",
                                     "traceback": ["  File \"execution.py\", line 496, in execute\n"],
                                     "current_inputs": {}, "current_outputs": {}}]]}
            del node_id
            return {prompt_id: entry}
        outputs: dict[str, Any] = {}
        for index, node_id in enumerate(save_nodes, start=1):
            filename = f"ComfyUI_{job['number']:05d}_{index}_.png"
            if self.output_root is not None:
                self.output_root.mkdir(parents=True, exist_ok=True)
                image = png_bytes(comment=f"{prompt_id} {filename}")
                (self.output_root / filename).write_bytes(b"" if self.faults.empty_output else image)
            outputs[node_id] = {"images": [{"filename": filename, "subfolder": "", "type": "output"}]}
            entry["meta"][node_id] = {"node_id": node_id, "display_node": node_id, "parent_node": None,
                                      "real_node_id": node_id}
        entry["outputs"] = outputs
        entry["status"] = {"status_str": "success", "completed": True, "messages": [
            ["execution_start", {"prompt_id": prompt_id, "timestamp": started}],
            ["execution_cached", {"nodes": [], "prompt_id": prompt_id, "timestamp": started + 1}],
            ["execution_success", {"prompt_id": prompt_id, "timestamp": started + 2}]]}
        return {prompt_id: entry}

    def comfy_view(self, query: dict[str, list[str]]) -> tuple[int, bytes]:
        name = (query.get("filename") or [""])[0]
        if not name or "/" in name or ".." in name:
            return 400, b""
        if self.output_root is None:
            return 200, b"" if self.faults.empty_output else png_bytes()
        path = self.output_root / name
        return (200, path.read_bytes()) if path.is_file() else (404, b"")

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
    def serverless_job(self, body: Any) -> dict[str, Any]:
        job_id = f"sync-{uuid.uuid4()}"
        with self.lock:
            self.jobs[job_id] = {"input": (body or {}).get("input"), "polls": 0}
        return self.serverless_status(job_id, first=True)

    def serverless_status(self, job_id: str, *, first: bool = False) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                return {}
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


class _Handler(BaseHTTPRequestHandler):
    server_runtime: RuntimeServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
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
        runtime = self.server_runtime
        url = urlparse(self.path)
        path = url.path[4:] if url.path.startswith("/api/") else url.path
        body = self._body() if method == "POST" else None
        runtime.requests.append(f"{method} {path}")
        faults = runtime.faults
        if runtime.kind == "serverless":
            parts = [p for p in path.split("/") if p]
            if parts[:1] == ["v2"] and len(parts) >= 3:
                parts = parts[2:]  # /v2/<endpoint_id>/<op>
            op = parts[0] if parts else ""
            if faults.health_down and op == "health":
                workers = {"idle": 0, "initializing": 0, "ready": 0, "running": 0, "throttled": 0, "unhealthy": 1}
                self._send(200, {"jobs": {"completed": 0, "failed": 0, "inProgress": 0, "inQueue": 0,
                                          "retried": 0}, "workers": workers})
            elif op == "health":
                self._send(200, {"jobs": {"completed": 27, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0},
                                 "workers": {"idle": 1, "initializing": 0, "ready": 1, "running": 0, "throttled": 0,
                                             "unhealthy": 0}})
            elif op == "runsync" and method == "POST":
                self._send(200, runtime.serverless_job(body))
            elif op == "status" and len(parts) == 2:
                answer = runtime.serverless_status(parts[1])
                self._send(200 if answer else 404, answer or {"error": "request does not exist"})
            else:
                self._send(404, {"error": "not found"})
            return
        if faults.health_down:
            self._send(503, {"error": "unhealthy", "error_type": "healthcheck"})
            return
        if runtime.kind == "comfyui":
            if path == "/prompt" and method == "POST":
                self._send(*runtime.comfy_prompt(body))
            elif path.startswith("/history/"):
                self._send(200, runtime.comfy_history(path[len("/history/"):]))
            elif path == "/view":
                status, data = runtime.comfy_view(parse_qs(url.query, keep_blank_values=True))
                self._send(status, data, "image/png")
            elif path == "/system_stats":
                self._send(200, {"system": {"os": "posix", "comfyui_version": "0.3.44",
                                            "python_version": "3.12.4", "pytorch_version": "2.7.1+cu126",
                                            "embedded_python": False, "argv": ["main.py", "--listen", "0.0.0.0"]},
                                 "devices": [{"name": "cuda:0 simulated : cudaMallocAsync", "type": "cuda",
                                              "index": 0, "vram_total": 25757220864, "vram_free": 24696061952}]})
            elif path == "/prompt":
                self._send(200, {"exec_info": {"queue_remaining": 0}})
            else:
                self._send(404, {"error": "not found"})
            return
        if path == "/health":
            self._send(200, b"", "text/plain")
        elif path == "/v1/models":
            self._send(200, runtime.models())
        elif path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            if runtime.hold():
                self._send(*runtime.completion(body, chat=path == "/v1/chat/completions"))
        else:
            self._send(404, {"error": {"message": "Not Found", "type": "NotFoundError", "param": None, "code": 404}})
