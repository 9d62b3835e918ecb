"""ComfyUI: the one client. POST /prompt, poll /history/<id>, fetch outputs with /view, read /object_info; the
workflow's inputs applied to its graph one way for the test generation and for jobs alike."""

from __future__ import annotations

import copy
import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final, final

import httpx

from gpuharness.core.errors import GpuharnessError
from gpuharness.core.runtimes import Runtime
from gpuharness.core.secrets import clip
from gpuharness.remote.http import Download, PhaseHttp, answer_json
from gpuharness.remote.lines import lines_of
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
from gpuharness.runtimes.comfyui.catalog import CatalogError, NodeCatalog
from gpuharness.runtimes.comfyui.problems import Problem, cause, problems
from gpuharness.runtimes.comfyui.validation import Verdict, validate
from gpuharness.runtimes.outputs import MAX_BYTES, Served

#: ComfyUI's entry in the runtime table, declared with its client at the end of this module. Its jobs write to its
#: `output` folder (ComfyUI's own name for it).
RUNTIME: Final = Runtime("comfyui", port=8188, health_path="/system_stats", process="main.py", imports_torch=True,
                         node_catalog=True, directory="ComfyUI", outputs="output", idle_probe=(
                             # busy while GET /queue lists a running or pending prompt; any new /history is activity
                             'q=$(get "$rt/queue" | tr -d " \n\t\r")',
                             'case "$q" in ""|*\'"queue_running":[]\'*) ;; *) busy=1 ;; esac',
                             'case "$q" in ""|*\'"queue_pending":[]\'*) ;; *) busy=1 ;; esac',
                             'mark=$(get "$rt/history" | cksum)'))
#: First poll interval; it doubles up to POLL_MAX_S (short generations finish fast, long ones poll calmly).
POLL_S = 0.25
#: GET /view's whole answer: an output file (a video may take minutes)
VIEW_TIMEOUT_S = 600.0
POLL_MAX_S = 2.0
OUTPUT_KINDS = ("images", "gifs", "videos", "audio")


class InputError(GpuharnessError, ValueError):
    """Job inputs that do not name exactly one input of the graph: a bad input, never retried."""

    cause: ClassVar[str] = "bad_input"
    remedy: ClassVar[str] = "fix the job's input names: each must name one graph input (NODE.input) or a name the " \
                            "workflow's `parameters` maps; the same inputs fail the same way"


@final
class PromptRejected(GpuharnessError):
    """ComfyUI refused the graph (HTTP 400): its body, the problems found in it and their cause."""

    def __init__(self, status: int, body: Any, found: list[Problem]) -> None:
        self.status = status
        self.body = body
        self.problems = found
        self.cause = cause(found) or "prompt_rejected"
        first = found[0] if found else None
        self.remedy = first.remedy if first else "read the server's answer"
        lines = "; ".join(p.line() for p in found[:5]) or clip(json.dumps(body), 300)
        super().__init__(f"ComfyUI refused the graph (HTTP {status}): {lines}{_server_said(body)}")


@final
@dataclass(frozen=True, slots=True)
class Execution:
    """A finished prompt as /history reports it: success, its output files, or the execution error."""

    prompt_id: str
    ok: bool
    outputs: tuple[dict[str, str], ...] = ()
    error: dict[str, Any] = field(default_factory=dict)
    status: str = ""

    def error_text(self) -> str:
        """The execution error as a log: `node N (Class): Type: message`, then the traceback."""
        if not self.error:
            return f"ComfyUI finished the prompt with status {self.status or 'unknown'}"
        head = (f"ComfyUI execution error in node {self.error.get('node_id')} ({self.error.get('node_type')}): "
                f"{self.error.get('exception_type')}: {self.error.get('exception_message', '')}".rstrip())
        trace = self.error.get("traceback")
        return head + ("\n" + "".join(map(str, trace)) if isinstance(trace, list) else "")


def apply_inputs(graph: Mapping[str, Any], inputs: Mapping[str, Any],
                 parameters: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The graph with a job's inputs set. Each key is a node id with {input: value}, `NODE.input`, a name the
    workflow's `parameters` maps to `NODE.input`, or an input name that exactly one node has as a value."""
    result = copy.deepcopy(dict(graph))
    for key, value in inputs.items():
        if key in result and isinstance(value, Mapping):
            node = result[key]
            if not isinstance(node, dict):
                raise InputError(f"input {key!r}: node {key} is not a node")
            node.setdefault("inputs", {}).update(value)
            continue
        target = (parameters or {}).get(key, key)
        node_id, dot, name = target.partition(".")
        if dot and node_id in result:
            result[node_id].setdefault("inputs", {})[name] = value
            continue
        holders = [n for n, node in result.items() if isinstance(node, dict) and isinstance(node.get("inputs"), dict)
                   and key in node["inputs"] and not isinstance(node["inputs"][key], list)]
        if len(holders) != 1:
            where = f"nodes {', '.join(holders)} all have it" if holders else "no node has it as a value"
            raise InputError(f"input {key!r} names no single graph input ({where}): write it as NODE.{key} "
                             f"(e.g. {holders[0] if holders else '6'}.{key}), or map it in the workflow's "
                             "`parameters`")
        result[holders[0]]["inputs"][key] = value
    return result


def build_test_graph(workflow: Mapping[str, Any]) -> dict[str, Any]:
    """The test graph (test_generation.graph, else the workflow's graph) with the test inputs applied."""
    spec = workflow.get("test_generation") or {}
    graph = spec.get("graph") or workflow.get("graph") or {}
    return apply_inputs(graph, spec.get("inputs") or {}, workflow.get("parameters"))


def job_graph(workflow: Mapping[str, Any], inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The graph a job runs: the workflow's graph (else its test graph) with the job's inputs applied."""
    graph = workflow.get("graph") or (workflow.get("test_generation") or {}).get("graph") or {}
    return apply_inputs(graph, inputs, workflow.get("parameters"))


@final
class ComfyUI:
    """One ComfyUI server over the runtime HTTP seam."""

    __slots__ = ("http",)

    def __init__(self, http: PhaseHttp) -> None:
        self.http = http

    def catalog(self, timeout_s: float | None = None) -> NodeCatalog:
        """The server's node catalog (GET /object_info): the classes it has, and the model files it lists; the whole
        answer by timeout_s (the seam's timeout by default: a wall-clock deadline, so a dripping server is cut off),
        its JSON depth-bounded."""
        response = self.http.get("/object_info", timeout=timeout_s)
        response.raise_for_status()
        try:
            return NodeCatalog(answer_json(response), source=self.http.base_url.rstrip("/") + "/object_info")
        except (ValueError, CatalogError) as exc:
            raise CatalogError(f"GET /object_info did not answer a catalog: {exc}") from None

    def check(self, graph: Any) -> tuple[Verdict, NodeCatalog]:
        """The graph validated against this server's catalog, without submitting it."""
        catalog = self.catalog()
        return validate(graph, catalog), catalog

    def submit(self, graph: Mapping[str, Any], *, client_id: str, prompt_id: str | None = None) -> str:
        """Queue the graph; its prompt id. PromptRejected when the server refuses it."""
        body: dict[str, Any] = {"prompt": graph, "client_id": client_id}
        if prompt_id is not None:
            body["prompt_id"] = prompt_id
        response = self.http.post("/prompt", json=body)
        answer = _json(response)
        if response.status_code != 200 or not isinstance(answer, dict) or "prompt_id" not in answer:
            raise PromptRejected(response.status_code, answer, problems(answer))
        return str(answer["prompt_id"])

    def execution(self, prompt_id: str) -> Execution | None:
        """The finished prompt, or None while it is queued or running."""
        answer = _json(self.http.get(f"/history/{prompt_id}"))
        entry = answer.get(prompt_id) if isinstance(answer, dict) else None
        if not isinstance(entry, dict):
            return None
        status = entry.get("status") or {}
        files = tuple(item for node in (entry.get("outputs") or {}).values() if isinstance(node, dict)
                      for kind in OUTPUT_KINDS for item in node.get(kind) or [] if isinstance(item, dict))
        if status.get("status_str") == "success" or (not status and entry.get("outputs")):
            return Execution(prompt_id, True, files, status="success")
        error: Any = next((payload for kind, payload in status.get("messages") or []
                      if kind in ("execution_error", "execution_interrupted")), {})
        return Execution(prompt_id, False, files, error if isinstance(error, dict) else {},
                         str(status.get("status_str") or ""))

    def view(self, item: Mapping[str, Any], *, limit: int = MAX_BYTES) -> Download:
        """An output file (GET /view), read up to `limit` bytes and one more."""
        return self.http.download("/view", params={"filename": item.get("filename", ""),
                                                   "subfolder": item.get("subfolder", ""),
                                                   "type": item.get("type", "output")}, limit=limit,
                                  timeout=VIEW_TIMEOUT_S)

    def cancel(self, prompt_id: str) -> None:
        """Interrupt the running prompt and drop it from the queue (best effort)."""
        for path, body in (("/interrupt", {"prompt_id": prompt_id}), ("/queue", {"delete": [prompt_id]})):
            try:
                self.http.post(path, json=body)
            except httpx.HTTPError:
                continue


def health(client: httpx.Client | PhaseHttp, **_: Any) -> Outcome:
    started = time.monotonic()
    response = get_health(PhaseHttp.over(client), str(RUNTIME.health_path))
    if isinstance(response, Outcome):
        return response
    devices = [d.get("name") for d in answer_json(response).get("devices", [])]
    return Outcome(True, f"ComfyUI answers; devices {devices}", duration_s=time.monotonic() - started)


def generate(client: httpx.Client | PhaseHttp, workflow: Mapping[str, Any], request: GenerationRequest) -> Outcome:
    """The test generation: submit the test graph, wait for it within the deadline, fetch and check outputs."""
    deadline_s, sleep, clock, poll_s = request.deadline_s, request.sleep, request.clock, POLL_S
    started = clock()
    end = started + deadline_s
    comfy = ComfyUI(PhaseHttp.over(client))
    try:
        graph = build_test_graph(workflow)
    except InputError as exc:
        return failed("bad_inputs", f"workflow {workflow.get('id')}: {exc}", started=started, clock=clock)
    if not graph:
        return failed("no_test_graph", f"workflow {workflow.get('id')} has no test graph (test_generation.graph)",
                      started=started, clock=clock)
    try:
        prompt_id = comfy.submit(graph, client_id=request.client_id or str(uuid.uuid4()))
        while (done := comfy.execution(prompt_id)) is None:
            if clock() + poll_s > end:
                return failed("timeout", f"the test generation did not finish within its timeout of "
                              f"{deadline_s:g}s (prompt {prompt_id} still queued or running)", started=started,
                              clock=clock)
            sleep(poll_s)
            poll_s = min(poll_s * 2, POLL_MAX_S)
    except PromptRejected as exc:
        return failed(exc.cause, str(exc), remedy=exc.remedy, started=started, clock=clock,
                      problems=[p.to_json() for p in exc.problems])
    except httpx.HTTPError as exc:
        last = comfy.http.calls[-1] if comfy.http.calls else None
        return transport_failure(exc, f"{last.method} {last.path}" if last else "ComfyUI", started=started,
                                 clock=clock)
    if not done.ok:
        text = done.error_text()
        return classified(text, "execution_error", (lines_of(text) or [""])[0], started=started, clock=clock)
    served: list[Served] = []
    for item in done.outputs:
        try:
            view = comfy.view(item)
        except httpx.HTTPError as exc:
            return transport_failure(exc, f"GET /view {item.get('filename')}", started=started, clock=clock)
        if view.status != 200:
            return failed("output_missing", f"GET /view {item.get('filename')} answered {view.status}",
                          started=started, clock=clock)
        served.append(Served(str(item.get("filename", "")), view.data, view.content_type))
    expected = (workflow.get("test_generation") or {}).get("expected_outputs") or []
    return check_expected(served, expected, started=started, clock=clock)


def _server_said(body: Any) -> str:
    """The server's own words for the first problem (what logs show, so the failure classifier reads them)."""
    if not isinstance(body, dict):
        return ""
    for entry in (body.get("node_errors") or {}).values():
        for item in entry.get("errors") or [] if isinstance(entry, dict) else []:
            if isinstance(item, dict):
                return f" | server: {item.get('message')}: {item.get('details')}"
    error = body.get("error")
    return f" | server: {error.get('message')}" if isinstance(error, dict) else ""


def _json(response: httpx.Response) -> Any:
    try:
        return answer_json(response)
    except ValueError:
        return response.text


declare(RUNTIME, health=health, generate=generate)
