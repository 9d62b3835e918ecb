"""RunPod Serverless endpoints, under /runpod-serverless/v2/<endpoint>
(https://github.com/runpod/docs/blob/a900806e/serverless/endpoints/operation-reference.mdx)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from gpuharness.sim.routing import ProviderWire, Route, SimRequest, SimResponse, json_response
from gpuharness.sim.state import SimState

PROVIDER = "runpod-serverless"
PREFIX = "/runpod-serverless"
TERMINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMED_OUT")


def _status(job: dict[str, Any], state: SimState) -> str:
    if job.get("final"):
        return str(job["final"])
    elapsed = state.clock() - float(job["created"])
    if elapsed < state.ready_delay_s / 2:
        return "IN_QUEUE"
    if elapsed < state.ready_delay_s:
        return "IN_PROGRESS"
    job_input = job["input"]
    job["final"] = "FAILED" if isinstance(job_input, dict) and job_input.get("fail") else "COMPLETED"
    return str(job["final"])


def chunks(job: dict[str, Any]) -> list[Any]:
    """What the simulated handler yields: each item of input.stream (a generator handler), else its one output."""
    job_input = job["input"]
    if isinstance(job_input, dict) and isinstance(job_input.get("stream"), list):
        return list(job_input["stream"])
    return [{"echo": job_input}]


def output(job: dict[str, Any]) -> Any:
    """The completed job's output: a streaming handler's chunks aggregated, else the echo."""
    job_input = job["input"]
    if isinstance(job_input, dict) and isinstance(job_input.get("stream"), list):
        return chunks(job)
    return {"echo": job_input}


def render(job: dict[str, Any], state: SimState) -> dict[str, Any]:
    status = _status(job, state)
    body: dict[str, Any] = {"id": job["id"], "status": status}
    if status in TERMINAL:
        body["delayTime"] = 824
        body["executionTime"] = 3391
    if status == "COMPLETED":
        body["output"] = output(job)
    elif status == "FAILED":
        # the worker SDK sends the error as a JSON-encoded string
        body["error"] = json.dumps({"error_type": "<class 'RuntimeError'>", "error_message": "handler failed",
                                    "error_traceback": "Traceback (most recent call last): ...",
                                    "hostname": "sim", "worker_id": "z3jr9rv2k3tt2y", "runpod_version": "1.7.0"})
        body["workerId"] = "z3jr9rv2k3tt2y"
    return body


def _submit(req: SimRequest, state: SimState, prefix: str = "") -> dict[str, Any] | SimResponse:
    if not isinstance(req.body, dict) or "input" not in req.body:
        return json_response(400, {"error": "request body must have an 'input' field"})  # [UNVERIFIED] body
    job_id = f"{prefix}{uuid.uuid4()}-u1"
    job = {"id": job_id, "endpoint": req.match["endpoint"], "input": req.body["input"], "created": state.clock()}
    state.jobs[(req.match["endpoint"], job_id)] = job
    state.increment("serverless_jobs")
    return job


def run(req: SimRequest, state: SimState) -> SimResponse:
    job = _submit(req, state)
    if isinstance(job, SimResponse):
        return job
    return json_response(200, {"id": job["id"], "status": "IN_QUEUE"})


def runsync(req: SimRequest, state: SimState) -> SimResponse:
    job = _submit(req, state, prefix="sync-")
    if isinstance(job, SimResponse):
        return job
    job["created"] = float(job["created"]) - state.ready_delay_s  # finishes within the default wait
    return json_response(200, render(job, state))


def _job(req: SimRequest, state: SimState) -> dict[str, Any] | None:
    return state.jobs.get((req.match["endpoint"], req.match["job"]))


def status(req: SimRequest, state: SimState) -> SimResponse:
    job = _job(req, state)
    if job is None:
        return json_response(404, {"error": "job not found"})  # [UNVERIFIED] body
    return json_response(200, render(job, state))


def cancel(req: SimRequest, state: SimState) -> SimResponse:
    job = _job(req, state)
    if job is None:
        return json_response(404, {"error": "job not found"})
    if _status(job, state) not in TERMINAL:
        job["final"] = "CANCELLED"
    return json_response(200, {"id": job["id"], "status": _status(job, state)})


def stream(req: SimRequest, state: SimState) -> SimResponse:
    """GET /stream/{job}: the chunks produced since the last call, each once; [] once all were read."""
    job = _job(req, state)
    if job is None:
        return json_response(404, {"error": "job not found"})
    status = _status(job, state)
    produced = chunks(job)
    if status == "IN_PROGRESS":
        # chunks appear as the job runs: the share of the running half of the delay that has passed
        half = state.ready_delay_s / 2 or 1.0
        done = (state.clock() - float(job["created"]) - half) / half
        produced = produced[:max(0, min(len(produced), int(len(produced) * done)))]
    elif status != "COMPLETED":
        produced = []
    sent = int(job.get("streamed", 0))
    job["streamed"] = max(sent, len(produced))
    return json_response(200, {"status": status, "stream": [{"output": c} for c in produced[sent:]]})


def purge_queue(req: SimRequest, state: SimState) -> SimResponse:
    """POST /purge-queue: drop the endpoint's queued jobs (running ones go on) -> {"removed", "status"}."""
    # [UNVERIFIED] what a purged job's /status answers afterwards (here: 404, as an unknown job)
    queued = [key for key, job in state.jobs.items()
              if key[0] == req.match["endpoint"] and _status(job, state) == "IN_QUEUE"]
    for key in queued:
        del state.jobs[key]
    return json_response(200, {"removed": len(queued), "status": "completed"})


def health(req: SimRequest, state: SimState) -> SimResponse:
    jobs = [j for (endpoint, _), j in state.jobs.items() if endpoint == req.match["endpoint"]]
    states = [_status(j, state) for j in jobs]
    return json_response(200, {
        "jobs": {"completed": states.count("COMPLETED"), "failed": states.count("FAILED"),
                 "inProgress": states.count("IN_PROGRESS"), "inQueue": states.count("IN_QUEUE"), "retried": 0},
        "workers": {"idle": 1, "initializing": 0, "ready": 1, "running": 1 if "IN_PROGRESS" in states else 0,
                    "throttled": 0, "unhealthy": 0}})


WIRE = ProviderWire(
    provider=PROVIDER,
    prefix=PREFIX,
    routes=(
        Route.of("GET", "/runpod-serverless/v2/{endpoint}/health", "read", health),
        Route.of("POST", "/runpod-serverless/v2/{endpoint}/run", "mutation", run),
        Route.of("POST", "/runpod-serverless/v2/{endpoint}/runsync", "mutation", runsync),
        Route.of("GET", "/runpod-serverless/v2/{endpoint}/status/{job}", "read", status),
        Route.of("POST", "/runpod-serverless/v2/{endpoint}/cancel/{job}", "mutation", cancel),
        Route.of("GET", "/runpod-serverless/v2/{endpoint}/stream/{job}", "read", stream),
        Route.of("POST", "/runpod-serverless/v2/{endpoint}/purge-queue", "mutation", purge_queue),
    ),
    # error bodies [UNVERIFIED]: the docs give status codes only
    unauthorized=lambda: json_response(401, {"error": "Unauthorized"}),
    rate_limited=lambda retry_after: json_response(429, {"error": "Too many requests"}),
    capacity=lambda: json_response(503, {"error": "no workers available"}),
    server_error=lambda: json_response(500, {"error": "Internal Server Error"}),
    not_found=lambda: json_response(404, {"error": "Not Found"}),
    entry={"endpoint_id": "sim-endpoint"},
)
