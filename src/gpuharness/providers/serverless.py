"""RunPod Serverless endpoints: health, run, runsync, status, cancel (jobs, not instances)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, final

import httpx

from gpuharness.core.json_text import loads_outside
from gpuharness.providers import fields
from gpuharness.providers.base import Capabilities, InventorySource, ProviderError, ProviderKind, adapter
from gpuharness.providers.transport import json_body

#: the SDK's terminal set (is_completed)
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


@final
@dataclass(frozen=True, slots=True)
class ServerlessJob:
    """A job as the endpoint reports it. `error` is decoded when the worker sent a JSON-encoded string."""

    id: str
    status: str
    output: Any = None
    error: Any = None
    delay_ms: int | None = None
    execution_ms: int | None = None
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        return self.status in TERMINAL


def job_of(provider: str, body: Any) -> ServerlessJob:
    data = fields.mapping(body, provider, "serverless job")
    error = data.get("error")
    if isinstance(error, str) and error.startswith("{"):
        try:
            error = loads_outside(error, what="the job's error")
        except ValueError:
            pass
    delay = fields.number(data.get("delayTime"))
    execution = fields.number(data.get("executionTime"))
    return ServerlessJob(id=str(data.get("id")), status=str(data.get("status")), output=data.get("output"),
                         error=error, delay_ms=None if delay is None else int(delay),
                         execution_ms=None if execution is None else int(execution), raw=data)


class EndpointHttp(Protocol):
    """What the endpoint client needs of its HTTP: idempotent reads and one-shot mutations (ProviderHttp, or the
    runtime seam's adapter in runtimes.serverless)."""

    sleep: Callable[[float], None]

    def read(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
             allow: tuple[int, ...] = ()) -> httpx.Response: ...

    def mutate(self, method: str, path: str, *, params: Mapping[str, Any] | None = None, json: Any = None,
               allow: tuple[int, ...] = ()) -> httpx.Response: ...

    def close(self) -> None: ...


@final
@adapter
class ServerlessEndpoint:
    """One endpoint: the one RunPod Serverless client (provider checks, the test generation and jobs use it).

    api_base is the host (https://api.runpod.ai or http://127.0.0.1:N/runpod-serverless) and endpoint_id its
    endpoint; endpoint_id None when the HTTP base already is the endpoint (https://api.runpod.ai/v2/<id>/)."""

    kind: ClassVar[ProviderKind] = ProviderKind("runpod-serverless")
    capabilities = Capabilities(label="RunPod Serverless endpoint", api_base="https://api.runpod.ai",
                                stop_start=False, interruptible=False, bid_price=False, serverless=True, ssh=False,
                                inventory=InventorySource.NONE, offers=False, rents=False)

    def __init__(self, name: str, http: EndpointHttp, endpoint_id: str | None) -> None:
        self.name = name
        self.http = http
        self.endpoint_id = endpoint_id
        self._base = f"/v2/{endpoint_id}" if endpoint_id else ""

    def health(self) -> dict[str, Any]:
        """{"jobs": {...}, "workers": {idle, initializing, ready, running, throttled, unhealthy}}."""
        answer = self.http.read("GET", f"{self._base}/health")
        return fields.mapping(json_body(answer, self.name), self.name, "GET /health")

    def run(self, job_input: Any, *, policy: dict[str, Any] | None = None) -> ServerlessJob:
        """Queue a job (a mutation: never retried blind)."""
        body: dict[str, Any] = {"input": job_input}
        if policy:
            body["policy"] = policy
        answer = self.http.mutate("POST", f"{self._base}/run", json=body)
        return job_of(self.name, json_body(answer, self.name, mutation=True))

    def runsync(self, job_input: Any, *, wait_ms: int | None = None) -> ServerlessJob:
        params = {"wait": wait_ms} if wait_ms is not None else None
        response = self.http.mutate("POST", f"{self._base}/runsync", params=params, json={"input": job_input})
        return job_of(self.name, json_body(response, self.name, mutation=True))

    def status(self, job_id: str) -> ServerlessJob | None:
        """The job, or None when it is unknown or its result expired (404)."""
        response = self.http.read("GET", f"{self._base}/status/{job_id}", allow=(404,))
        return None if response.status_code == 404 else job_of(self.name, json_body(response, self.name))

    def cancel(self, job_id: str) -> ServerlessJob:
        answer = self.http.mutate("POST", f"{self._base}/cancel/{job_id}")
        return job_of(self.name, json_body(answer, self.name, mutation=True))

    def wait(self, job_id: str, *, timeout_s: float, poll_s: float = 2.0,
             sleep: Callable[[float], None] | None = None) -> ServerlessJob:
        """Poll status until terminal; ProviderError when the job vanishes or the timeout passes."""
        pause = sleep or self.http.sleep
        waited = 0.0
        while True:
            job = self.status(job_id)
            if job is None:
                raise ProviderError("not_found", f"job {job_id} is unknown or its result expired",
                                    provider=self.name)
            if job.done:
                return job
            if waited >= timeout_s:
                raise ProviderError("server", f"job {job_id} still {job.status} after {timeout_s:g}s",
                                    provider=self.name)
            pause(poll_s)
            waited += poll_s

    def check(self) -> None:
        self.health()

    def close(self) -> None:
        self.http.close()
