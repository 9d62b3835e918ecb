"""OpenAI-compatible servers (vLLM, SGLang, TGI): /health, /v1/models lists the model, a small /v1/completions."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Final

import httpx

from gpuharness.core.runtimes import Runtime
from gpuharness.core.secrets import clip
from gpuharness.remote.http import PhaseHttp, answer_json
from gpuharness.runtimes import (
    GenerationRequest,
    Outcome,
    check_expected,
    classified,
    declare,
    failed,
    get_health,
    transport_failure,
)
from gpuharness.runtimes.outputs import Served, judge

#: OpenAI-compatible servers' entry in the runtime table, declared with the client at the end of this module
RUNTIME: Final = Runtime("openai", port=8000, health_path="/health", process="vllm", directory="vllm", idle_probe=(
    # vLLM's Prometheus metrics: busy while a request runs or waits; a finished request moves the success counter
    'm=$(get "$rt/metrics")',
    'n=$(printf "%s\n" "$m" | awk \'/^vllm:num_requests_(running|waiting)/ {s+=$NF} END {printf "%d", s}\')',
    '[ "${n:-0}" -gt 0 ] && busy=1',
    'mark=$(printf "%s\n" "$m" | grep "^vllm:request_success_total" | cksum)'))
#: the completion answer's name as an output of the test generation (a job's record is completion.json on its host)
ANSWER = "completion.json"


def health(client: httpx.Client | PhaseHttp, **_: Any) -> Outcome:
    started = time.monotonic()
    answer = get_health(PhaseHttp.over(client), str(RUNTIME.health_path),
                        hint="engine starting, dead or out of memory: read the server log")
    if isinstance(answer, Outcome):
        return answer
    return Outcome(True, "GET /health answered 200", duration_s=time.monotonic() - started)


def error_text(response: httpx.Response, limit: int = 300) -> str:
    """The message of an error answer, in each server's shape: vLLM <= 0.10 / SGLang
    `{"object":"error","message":...}`, newer vLLM `{"error":{"message":...}}`, TGI `{"error":"...",
    "error_type":...}`; a body that is not JSON (a proxy's page, a traceback) as its first `limit` chars."""
    try:
        body = answer_json(response)
    except ValueError:
        return response.text[:limit]
    if isinstance(body, dict):
        error = body.get("error", body)
        if isinstance(error, dict):
            return str(error.get("message", error))
        return str(body.get("message") or error)
    return str(body)[:limit]


def choice_text(body: Any) -> str:
    """The first choice's text: `text` of a completion, `message.content` of a chat completion."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return ""
    first = choices[0]
    message = first.get("message")
    text = message.get("content") if isinstance(message, dict) else first.get("text")
    return text if isinstance(text, str) else ""


def generate(client: httpx.Client | PhaseHttp, workflow: Mapping[str, Any], request: GenerationRequest) -> Outcome:
    """The test generation: the model is served (/v1/models), and a short completion has text."""
    deadline_s, clock = request.deadline_s, request.clock
    started = clock()
    http = PhaseHttp.over(client)
    spec = workflow.get("test_generation") or {}
    inputs = spec.get("inputs") or {}
    model = inputs.get("model") or request.model or workflow.get("model")
    try:
        listing = http.get("/v1/models", timeout=deadline_s)
    except httpx.HTTPError as exc:
        return transport_failure(exc, "GET /v1/models", started=started, clock=clock)
    if listing.status_code != 200:
        return failed("unhealthy", f"GET /v1/models answered {listing.status_code}: {error_text(listing)}",
                      started=started, clock=clock)
    served = [item.get("id") for item in answer_json(listing).get("data", [])]
    if model not in served:
        return failed("model_missing", f"the server does not serve {model!r}; /v1/models lists {served}",
                      remedy="start the server with the model of the deployment (e.g. vllm serve MODEL)",
                      started=started, clock=clock)
    body = {"model": model, "prompt": inputs.get("prompt", "Hello"), "max_tokens": int(inputs.get("max_tokens", 16)),
            "temperature": 0}
    remaining = max(0.1, deadline_s - (clock() - started))
    try:
        response = http.post("/v1/completions", json=body, timeout=remaining)
    except httpx.HTTPError as exc:
        return transport_failure(exc, "POST /v1/completions", started=started, clock=clock)
    if response.status_code != 200:
        text = error_text(response)
        return classified(text, "completion_failed", f"POST /v1/completions answered {response.status_code}: {text}",
                          started=started, clock=clock)
    answer = judge(Served(ANSWER, response.content, "application/json"))  # the API's type, whatever the header says
    if answer.refusal is not None:
        return failed(answer.refusal.cause, f"POST /v1/completions answered 200, but {answer.refusal.reason}",
                      remedy=answer.refusal.remedy, started=started, clock=clock)
    text = choice_text(answer.value)
    outcome = check_expected([Served(ANSWER, response.content, "application/json"),
                              Served("completion.txt", text.encode(), "text/plain")],
                             spec.get("expected_outputs") or [], started=started, clock=clock)
    if not outcome.ok:
        return outcome
    return replace(outcome, message=f"completion of {len(text)} chars: {clip(text.strip(), 60)!r}")


declare(RUNTIME, health=health, generate=generate)
