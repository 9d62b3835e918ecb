"""The simulated OpenAI-compatible runtime (vLLM's server): /health, /v1/models, /v1/completions and
/v1/chat/completions in vLLM's shapes, and its service on a simulated host (`python -m
vllm.entrypoints.openai.api_server`)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any, Final, final

from gpuharness.core.runtimes import RUNTIMES
from gpuharness.sim.simulated_runtime import (
    DROPPED,
    JSON,
    SERVICE_MAIN,
    UNHEALTHY,
    Answer,
    RuntimeSetting,
    ServiceProcess,
    SimulatedRuntime,
)

NAME: Final[str] = "openai"


@final
class OpenAIServer:
    """vLLM's OpenAI-compatible routes, serving the setting's model."""

    def __init__(self, setting: RuntimeSetting) -> None:
        self.setting = setting
        self.running = 0  # requests being answered now
        self.served = 0  # requests answered

    def metrics(self) -> str:
        """GET /metrics: vLLM's Prometheus gauges and counter the shutdown guard reads (running, waiting, done)."""
        name = self.setting.model
        return (f'vllm:num_requests_running{{model_name="{name}"}} {self.running}\n'
                f'vllm:num_requests_waiting{{model_name="{name}"}} 0\n'
                f'vllm:request_success_total{{finished_reason="length",model_name="{name}"}} {self.served}\n')

    def completion(self, body: Any, *, chat: bool = False) -> tuple[int, Any]:
        """POST /v1/completions, or /v1/chat/completions with chat (vLLM's shapes); the bytes of a served_output
        fault instead, when one is armed."""
        faults, expected = self.setting.faults(), self.setting.model
        if faults.oom:
            return 500, {"object": "error", "message": "CUDA out of memory. Tried to allocate 2.00 GiB.",
                         "type": "InternalServerError", "param": None, "code": 500}
        model = body.get("model") if isinstance(body, dict) else None
        if model != expected:
            return 404, {"object": "error", "message": f"The model `{model}` does not exist.",
                         "type": "NotFoundError", "param": None, "code": 404}
        if faults.served_output is not None:  # a hostile server's answer, as bytes
            return 200, faults.served_output[1]
        text = "" if faults.empty_output else " world! This is a test."
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
        """never_finishes: the request hangs while the runtime runs (False once it stopped: the connection is then
        dropped unanswered)."""
        while self.setting.faults().never_finishes:
            if not self.setting.running():
                return False
            time.sleep(0.02)
        return True

    def models(self) -> dict[str, Any]:
        name = "some-other/model" if self.setting.faults().wrong_model else self.setting.model
        return {"object": "list", "data": [{"id": name, "object": "model", "created": 1724100000,
                                            "owned_by": "vllm", "root": name, "parent": None,
                                            "max_model_len": 32768}]}

    def respond(self, method: str, path: str, query: Mapping[str, list[str]], body: Any) -> Answer:
        if self.setting.faults().health_down:
            return UNHEALTHY
        if path == "/health":
            return 200, b"", "text/plain"
        if path == "/v1/models":
            return 200, self.models(), JSON
        if path == "/metrics":
            return 200, self.metrics().encode(), "text/plain; version=0.0.4"
        if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
            self.running += 1
            try:
                if not self.hold():
                    return DROPPED, b"", ""
                return (*self.completion(body, chat=path == "/v1/chat/completions"), JSON)
            finally:
                self.running -= 1
                self.served += 1
        return 404, {"error": {"message": "Not Found", "type": "NotFoundError", "param": None, "code": 404}}, JSON


_API_SERVER: Final[str] = "vllm.entrypoints.openai.api_server"
#: the packages of the module its service runs (`python -m`), in its virtual environment
_PACKAGES: Final[tuple[str, ...]] = ("vllm", "vllm/entrypoints", "vllm/entrypoints/openai")
SIMULATED: Final = SimulatedRuntime(
    OpenAIServer,
    service=ServiceProcess(
        ("-m", _API_SERVER, "--port", str(RUNTIMES[NAME].port)),
        packages={**{f"{package}/__init__.py": "" for package in _PACKAGES},
                  f"{_PACKAGES[-1]}/api_server.py": SERVICE_MAIN}),
    image_words=("vllm", "openai"))
