"""RunPod Serverless: /health worker counts, then /runsync with the test input, falling back to /status polling."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from gpuharness.runtimes import Artifact, Clock, Outcome, Sleep, classified, failed, get_health, transport_failure

POLL_S = 2.0
TERMINAL_FAILURES = ("FAILED", "CANCELLED", "TIMED_OUT")


def health(client: httpx.Client, **_: Any) -> Outcome:
    started = time.monotonic()
    response = get_health(client, "health")
    if isinstance(response, Outcome):
        return response
    workers = response.json().get("workers") or {}
    usable = int(workers.get("idle", 0)) + int(workers.get("ready", 0)) + int(workers.get("running", 0))
    if usable == 0:
        return failed("no_workers", f"the endpoint has no usable worker: {workers} (check max workers, GPU "
                      "availability and the worker image)", started=started)
    return Outcome(True, f"workers {workers}", duration_s=time.monotonic() - started)


def generate(client: httpx.Client, workflow: dict[str, Any], *, deadline_s: float, sleep: Sleep,
                    clock: Clock, poll_s: float = POLL_S) -> Outcome:
    started = clock()
    end = started + deadline_s
    payload = {"input": (workflow.get("test_generation") or {}).get("inputs") or {}}
    wait_ms = int(min(max(deadline_s, 1.0), 300.0) * 1000)
    try:
        response = client.post("runsync", params={"wait": wait_ms}, json=payload,
                               timeout=httpx.Timeout(deadline_s + 5))
    except httpx.HTTPError as exc:
        return transport_failure(exc, "POST /runsync", started=started, clock=clock)
    if response.status_code != 200:
        return failed("http_error", f"POST /runsync answered {response.status_code}: {response.text[:200]}",
                      started=started, clock=clock)
    job = response.json()
    while job.get("status") not in ("COMPLETED", *TERMINAL_FAILURES):
        if clock() + poll_s > end:
            return failed("timeout", f"job {job.get('id')} still {job.get('status')} after the test timeout of "
                          f"{deadline_s:g}s", started=started, clock=clock)
        sleep(poll_s)
        try:
            polled = client.get(f"status/{job['id']}")
        except httpx.HTTPError as exc:
            return transport_failure(exc, f"GET /status/{job.get('id')}", started=started, clock=clock)
        if polled.status_code != 200:
            return failed("http_error", f"GET /status/{job.get('id')} answered {polled.status_code}",
                          started=started, clock=clock)
        job = polled.json()
    if job["status"] != "COMPLETED":
        error = job.get("error") or ""
        try:
            parsed = json.loads(error) if isinstance(error, str) and error.startswith("{") else None
        except ValueError:
            parsed = None
        text = parsed.get("error_message", error) if isinstance(parsed, dict) else str(error)
        return classified(str(text), "job_failed", f"job {job.get('id')} {job['status']}: {text}",
                          started=started, clock=clock)
    output = job.get("output")
    if output in (None, [], {}, ""):
        return failed("empty_output", f"job {job.get('id')} COMPLETED without output", started=started, clock=clock)
    size = len(json.dumps(output).encode())
    return Outcome(True, f"job {job.get('id')} COMPLETED with output ({size} B)",
                   outputs=(Artifact("output.json", "application/json", size),), duration_s=clock() - started)
