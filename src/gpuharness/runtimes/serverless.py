"""RunPod Serverless as a runtime: /health worker counts, then /runsync with the test input, falling back to
/status polling. The client is the one RunPod Serverless client (providers.serverless.ServerlessEndpoint); here it
speaks through the runtime HTTP seam."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, Final, final

import httpx

from gpuharness.core.runtimes import Runtime
from gpuharness.providers.base import ProviderError
from gpuharness.providers.failures import classify
from gpuharness.providers.serverless import ServerlessEndpoint, ServerlessJob
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes import (
    Clock,
    GenerationRequest,
    Outcome,
    Sleep,
    check_expected,
    classified,
    declare,
    failed,
    transport_failure,
)
from gpuharness.runtimes.outputs import Served

POLL_S = 2.0


@final
class _EndpointSeam:
    """The runtime seam as the endpoint client's HTTP: one attempt per call (the test generation has its own
    deadline); an error answer raises ProviderError as the provider transport does."""

    def __init__(self, http: PhaseHttp, sleep: Callable[[float], None], timeout_s: float) -> None:
        self.http = http
        self.sleep = sleep
        self.timeout_s = timeout_s

    def read(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
             allow: tuple[int, ...] = ()) -> httpx.Response:
        return self._call(method, path, params, json, allow)

    def mutate(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
               allow: tuple[int, ...] = ()) -> httpx.Response:
        return self._call(method, path, params, json, allow)

    def _call(self, method: str, path: str, params: Mapping[str, Any] | None, body: Any,
              allow: tuple[int, ...]) -> httpx.Response:
        response = self.http.request(method, path.lstrip("/"), params=params, json=body, timeout=self.timeout_s)
        if response.is_success or response.status_code in allow:
            return response
        raise classify("serverless", response.status_code, response.text)

    def close(self) -> None:
        self.http.close()


def endpoint(client: httpx.Client | PhaseHttp, *, sleep: Sleep = time.sleep,
             timeout_s: float = 30.0) -> ServerlessEndpoint:
    """The endpoint client over a runtime client whose base URL is the endpoint (https://api.runpod.ai/v2/<id>/)."""
    return ServerlessEndpoint("serverless", _EndpointSeam(PhaseHttp.over(client), sleep, timeout_s), None)


def health(client: httpx.Client | PhaseHttp, **_: Any) -> Outcome:
    started = time.monotonic()
    try:
        answer = endpoint(client).health()
    except httpx.HTTPError as exc:
        return transport_failure(exc, "GET /health", started=started)
    except ProviderError as exc:
        return failed("unhealthy", f"GET /health: {exc}", started=started)
    workers = answer.get("workers") or {}
    usable = int(workers.get("idle", 0)) + int(workers.get("ready", 0)) + int(workers.get("running", 0))
    if usable == 0:
        return failed("no_workers", f"the endpoint has no usable worker: {workers} (check max workers, GPU "
                      "availability and the worker image)", started=started)
    return Outcome(True, f"workers {workers}", duration_s=time.monotonic() - started)


def generate(client: httpx.Client | PhaseHttp, workflow: Mapping[str, Any], request: GenerationRequest) -> Outcome:
    """The test generation: /runsync with the test input, then /status until done or the deadline."""
    deadline_s, sleep, clock, poll_s = request.deadline_s, request.sleep, request.clock, POLL_S
    started = clock()
    end = started + deadline_s
    client_of = endpoint(client, sleep=sleep, timeout_s=deadline_s + 5)
    job_input = (workflow.get("test_generation") or {}).get("inputs") or {}
    try:
        job = client_of.runsync(job_input, wait_ms=int(min(max(deadline_s, 1.0), 300.0) * 1000))
        while not job.done:
            if clock() + poll_s > end:
                return failed("timeout", f"job {job.id} still {job.status} after the test timeout of "
                              f"{deadline_s:g}s", started=started, clock=clock)
            sleep(poll_s)
            polled = client_of.status(job.id)
            if polled is None:
                return failed("http_error", f"GET /status/{job.id} answered 404: the job is unknown or expired",
                              started=started, clock=clock)
            job = polled
    except httpx.HTTPError as exc:
        return transport_failure(exc, "RunPod Serverless", started=started, clock=clock)
    except ProviderError as exc:
        return failed("http_error", str(exc), started=started, clock=clock)
    return _judged(job, (workflow.get("test_generation") or {}).get("expected_outputs") or [], started, clock)


def error_text(job: ServerlessJob) -> str:
    """A failed job's error message (the worker's `error_message` when it sent runpod-python's JSON)."""
    error = job.error
    if isinstance(error, dict):
        return str(error.get("error_message") or json.dumps(error))
    return str(error or "")


def _judged(job: ServerlessJob, expected: list[dict[str, Any]], started: float, clock: Clock) -> Outcome:
    """A finished job: its output (the worker's JSON, as the endpoint answered it) judged as an output.json."""
    if job.status != "COMPLETED":
        text = error_text(job)
        return classified(text, "job_failed", f"job {job.id} {job.status}: {text}", started=started, clock=clock)
    if job.output in (None, [], {}, ""):
        return failed("empty_output", f"job {job.id} COMPLETED without output", started=started, clock=clock)
    # written back as the endpoint sent it: a NaN or a lone surrogate it carried is refused as not JSON
    data = json.dumps(job.output).encode()
    outcome = check_expected([Served("output.json", data, "application/json")], expected, started=started,
                             clock=clock)
    if not outcome.ok:
        return replace(outcome, message=f"job {job.id} COMPLETED: {outcome.message}")
    return replace(outcome, message=f"job {job.id} COMPLETED with output ({len(data)} B)")


#: a serverless endpoint's entry in the runtime table: no host of ours, nothing to install, probe or retrieve over SSH
RUNTIME: Final = declare(Runtime("serverless", health_path="/health", has_host=False), health=health,
                         generate=generate)
