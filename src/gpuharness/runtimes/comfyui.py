"""ComfyUI: POST /prompt with the workflow's test graph, poll /history/<id>, fetch outputs with /view."""

from __future__ import annotations

import copy
import json
import time
import uuid
from typing import Any

import httpx

from gpuharness.runtimes import (
    Artifact,
    Clock,
    Outcome,
    Sleep,
    check_expected,
    classified,
    failed,
    get_health,
    transport_failure,
)

#: First poll interval; it doubles up to POLL_MAX_S (short generations finish fast, long ones poll calmly).
POLL_S = 0.25
POLL_MAX_S = 2.0


def health(client: httpx.Client, **_: Any) -> Outcome:
    started = time.monotonic()
    response = get_health(client, "/system_stats")
    if isinstance(response, Outcome):
        return response
    devices = [d.get("name") for d in response.json().get("devices", [])]
    return Outcome(True, f"ComfyUI answers; devices {devices}", duration_s=time.monotonic() - started)


def build_test_graph(workflow: dict[str, Any]) -> dict[str, Any]:
    """The test graph with the test inputs applied: inputs = {node_id: {input_name: value}}."""
    spec = workflow.get("test_generation") or {}
    graph = copy.deepcopy(spec.get("graph") or workflow.get("graph") or {})
    for node_id, values in (spec.get("inputs") or {}).items():
        if node_id in graph and isinstance(values, dict):
            graph[node_id].setdefault("inputs", {}).update(values)
    return graph


def _prompt_error(body: Any, started: float, clock: Clock) -> Outcome:
    error = body.get("error") if isinstance(body, dict) else body
    node_errors = body.get("node_errors") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("type") == "missing_node_type":
        info = error.get("extra_info") or {}
        return failed("custom_node_import",
                      f"ComfyUI refused the test graph: {error.get('message')} (class {info.get('class_type')}, "
                      f"{error.get('details')})",
                      remedy="install the custom node, or pin its repo to the last known good commit and restart",
                      started=started, clock=clock)
    if node_errors:
        first_id, first = next(iter(node_errors.items()))
        errors = first.get("errors") or [{}]
        return failed("node_errors", f"ComfyUI rejected node {first_id} ({first.get('class_type')}): "
                      f"{errors[0].get('message')}: {errors[0].get('details')}",
                      remedy="fix the workflow inputs or install the missing model file", started=started, clock=clock)
    message = error.get("message") if isinstance(error, dict) else str(error)
    return failed("prompt_rejected", f"ComfyUI rejected the prompt: {message}", started=started, clock=clock)


def generate(client: httpx.Client, workflow: dict[str, Any], *, deadline_s: float, sleep: Sleep,
             clock: Clock, poll_s: float = POLL_S, client_id: str | None = None) -> Outcome:
    started = clock()
    end = started + deadline_s
    graph = build_test_graph(workflow)
    if not graph:
        return failed("no_test_graph", f"workflow {workflow.get('id')} has no test graph (test_generation.graph)",
                      started=started, clock=clock)
    try:
        response = client.post("/prompt", json={"prompt": graph, "client_id": client_id or str(uuid.uuid4())})
    except httpx.HTTPError as exc:
        return transport_failure(exc, "POST /prompt", started=started, clock=clock)
    body = _json(response)
    if response.status_code != 200 or not isinstance(body, dict) or "prompt_id" not in body:
        return _prompt_error(body, started, clock)
    prompt_id = body["prompt_id"]
    entry: dict[str, Any] | None = None
    while True:
        try:
            history = client.get(f"/history/{prompt_id}")
        except httpx.HTTPError as exc:
            return transport_failure(exc, f"GET /history/{prompt_id}", started=started, clock=clock)
        data = _json(history)
        if isinstance(data, dict) and prompt_id in data:
            entry = data[prompt_id]
            break
        if clock() + poll_s > end:
            return failed("timeout", f"the test generation did not finish within its timeout of {deadline_s:g}s "
                          f"(prompt {prompt_id} still queued or running)", started=started, clock=clock)
        sleep(poll_s)
        poll_s = min(poll_s * 2, POLL_MAX_S)
    status = entry.get("status") or {}
    if status.get("status_str") != "success":
        for kind, payload in status.get("messages") or []:
            if kind == "execution_error":
                text = f"{payload.get('exception_type')}: {payload.get('exception_message')}"
                return classified(text, "execution_error",
                                  f"ComfyUI execution error in node {payload.get('node_id')} "
                                  f"({payload.get('node_type')}): {text.splitlines()[0]}", started=started, clock=clock)
        return failed("execution_error", f"ComfyUI finished with status {status.get('status_str')}: "
                      f"{json.dumps(status.get('messages'))[:300]}", started=started, clock=clock)
    artifacts: list[Artifact] = []
    for node_output in (entry.get("outputs") or {}).values():
        for kind in ("images", "gifs", "videos", "audio"):
            for item in node_output.get(kind) or []:
                params = {"filename": item.get("filename", ""), "subfolder": item.get("subfolder", ""),
                          "type": item.get("type", "output")}
                try:
                    view = client.get("/view", params=params)
                except httpx.HTTPError as exc:
                    return transport_failure(exc, f"GET /view {params['filename']}", started=started, clock=clock)
                if view.status_code != 200:
                    return failed("output_missing", f"GET /view {params['filename']} answered {view.status_code}",
                                  started=started, clock=clock)
                artifacts.append(Artifact(params["filename"], _sniff(view.content,
                                                                     view.headers.get("content-type", "")),
                                          len(view.content)))
    expected = (workflow.get("test_generation") or {}).get("expected_outputs") or []
    return check_expected(artifacts, expected, started=started, clock=clock)


def _sniff(data: bytes, declared: str) -> str:
    """The real type from magic bytes (a PNG header on a .png), falling back to the declared type."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data[:3] == b"\xff\xd8\xff":
        return "image/jpeg"
    if data[4:8] == b"ftyp":
        return "video/mp4"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    if not data:
        return declared.split(";")[0] or "application/octet-stream"
    return "application/octet-stream"


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return response.text
