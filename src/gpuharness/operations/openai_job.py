"""Jobs on an OpenAI-compatible server (vLLM, SGLang, TGI): POST /v1/completions, or /v1/chat/completions when
the workflow says `"api": "chat"`.

The completion is written to the host as `<workspace>/<outputs folder>/<job>/completion.json` (the deployment's
outputs_dir) and recorded on the ledger like a ComfyUI output (remote_path, sha256, synced_at null): `gpuharness
retrieve` stays the one way outputs reach the user, and destroy refuses until it ran. A completion that cannot be
stored fails the job. The request runs on a worker thread, so the run loop keeps enforcing per_job_usd and the
deadline; cancel drops the connection (vLLM and SGLang abort a request whose client went away).
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, final

import httpx

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.secrets import clip
from gpuharness.operations.run import ExecutorSeams, JobProgress
from gpuharness.remote import Remote, RemoteError
from gpuharness.remote.http import PhaseHttp
from gpuharness.remote.script import ShellScript
from gpuharness.runtimes.openai import choice_text, error_text
from gpuharness.runtimes.outputs import Served, judge

APIS: dict[str, str] = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
ARTIFACT = "completion.json"


def request_for(workflow: dict[str, Any], inputs: dict[str, Any], model: str | None) -> tuple[str, dict[str, Any]]:
    """The path and body of the job's request: the job's inputs as request fields, the deployment's model unless
    the inputs name one; for chat, a bare `prompt` becomes one user message."""
    api = str(workflow.get("api") or "completions")
    if api not in APIS:
        raise ValueError(f"workflow {workflow.get('id')}: api {api!r} is not one of {', '.join(APIS)}")
    body: dict[str, Any] = {"model": model or workflow.get("model"), **inputs}
    if api == "chat" and "messages" not in body and "prompt" in body:
        body["messages"] = [{"role": "user", "content": body.pop("prompt")}]
    return APIS[api], body


def read_answer(response: httpx.Response) -> tuple[dict[str, Any] | None, str | None]:
    """(the completion, None), or (None, the server's error). Errors come as a non-200 status, or (some proxies and
    old servers) as a 200 with `{"object":"error"}` or an `error` member; a 200 whose body does not decode fully as
    JSON (runtimes.outputs: cut, not UTF-8, NaN, a key named twice) is one too."""
    if response.status_code == 200:
        verdict = judge(Served(ARTIFACT, response.content, "application/json"))
        if verdict.refusal is not None:
            return None, f"HTTP 200: {verdict.refusal.reason}"
        body = verdict.value
        if isinstance(body, dict) and body.get("object") != "error" and "error" not in body:
            return body, None
    return None, f"HTTP {response.status_code}: {error_text(response, limit=4000)}"


def answer_error(response: httpx.Response) -> str | None:
    """The server's error, or None for a completion (read_answer)."""
    return read_answer(response)[1]


@final
@dataclass(slots=True)
class _Call:
    """One request in flight on its worker thread."""

    path: str
    body: dict[str, Any]
    done: threading.Event = field(default_factory=threading.Event)
    answer: dict[str, Any] | None = None
    error: str | None = None


@final
class OpenAIJobExecutor:
    """One HTTP client to one OpenAI-compatible server, and (opened when the first output is stored) one SSH
    connection to its host, for the run phase."""

    __slots__ = ("calls", "client", "connect", "deployment", "endpoint", "outputs_dir", "remote", "timeout_s")

    def __init__(self, deployment: Deployment, connect: Callable[[Deployment], Remote], *,
                 timeout_s: float = 3600.0) -> None:
        endpoint = deployment.endpoint
        if not endpoint:
            raise ValueError(f"deployment {deployment.id} has no runtime endpoint")
        if deployment.ssh_route is None:
            raise ValueError(f"deployment {deployment.id} has no SSH route to keep its outputs on")
        self.deployment = deployment
        self.connect = connect
        self.remote: Remote | None = None
        self.endpoint = str(endpoint)
        # the run loop enforces the job's deadline; this only bounds a request nobody waits for any more
        self.timeout_s = timeout_s
        self.client = PhaseHttp(self.endpoint, timeout_s=timeout_s)
        self.outputs_dir = deployment.outputs_dir
        self.calls: dict[str, _Call] = {}

    def submit(self, workflow: dict[str, Any], inputs: dict[str, Any], job_id: str) -> str:
        path, body = request_for(workflow, inputs, self.deployment.model)
        call = _Call(path, body)
        self.calls[job_id] = call
        threading.Thread(target=self._request, args=(self.client, call), name=f"gpuharness-{job_id}",
                         daemon=True).start()
        return job_id

    @staticmethod
    def _request(client: PhaseHttp, call: _Call) -> None:
        try:
            response = client.post(call.path, json=call.body)
        except (httpx.HTTPError, RuntimeError) as exc:  # RuntimeError: the client was closed by a cancel
            call.error = f"POST {call.path} got no answer: {type(exc).__name__}: {exc}"
        else:
            call.answer, error = read_answer(response)
            call.error = None if error is None else f"POST {call.path} answered {error}"
        finally:
            call.done.set()

    def poll(self, handle: str) -> JobProgress:
        call = self.calls[handle]
        if not call.done.is_set():
            return JobProgress("running", marker=f"waiting for {call.path}")
        if call.error is not None or call.answer is None:
            return JobProgress("failed", log=call.error or "the server answered nothing")
        try:
            output = self._store(handle, call.path, call.body, call.answer)
        except (RemoteError, RuntimeError, UserError) as exc:
            return JobProgress("failed", log=f"the completion arrived but could not be stored on the host "
                                             f"{self.deployment.id}: {exc}")
        return JobProgress("completed", outputs=(output,))

    def _store(self, job_id: str, path: str, body: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
        """Write the completion record on the host (one exec: written aside, renamed, hashed back)."""
        first = (answer.get("choices") or [{}])[0]
        record = {"job": job_id, "deployment": self.deployment.id, "api": path, "request": body,
                  "id": answer.get("id"), "model": answer.get("model"), "created": answer.get("created"),
                  "text": choice_text(answer), "finish_reason": first.get("finish_reason") if isinstance(first, dict)
                  else None, "usage": answer.get("usage")}
        data = json.dumps(record, indent=2, sort_keys=True) + "\n"
        sha = hashlib.sha256(data.encode()).hexdigest()
        script = ShellScript(workspace=self.deployment.workspace, header=("set -eu",))
        target = script.under_workspace(self.deployment.outputs_folder, job_id, ARTIFACT, what="job id")
        script.let("target", target).let("data", data).code(
            'mkdir -p "$(dirname "$target")"', 'printf \'%s\' "$data" > "$target.part"', 'mv "$target.part" "$target"',
            'sha256sum "$target"')
        if self.remote is None:
            self.remote = self.connect(self.deployment)
        result = self.remote.exec(script.text(), deadline_s=60.0)
        written = result.stdout.split(" ", 1)[0].strip() if result.stdout else ""
        if result.exit_status != 0 or written != sha:
            raise RuntimeError(f"writing {target} failed (exit {result.exit_status}, sha256 {written or 'none'} "
                               f"!= {sha[:12]}): {clip(result.stderr.strip(), 300, tail=True)}")
        return {"name": ARTIFACT, "remote_path": target, "sha256": sha, "size": len(data.encode())}

    def cancel(self, handle: str) -> None:
        call = self.calls.get(handle)
        if call is not None and not call.done.is_set():
            # drop the connection (the server sees its client go away); later jobs get a fresh client
            dropped, self.client = self.client, PhaseHttp(self.endpoint, timeout_s=self.timeout_s)
            dropped.close()

    def close(self) -> None:
        self.client.close()
        if self.remote is not None:
            self.remote.close()
            self.remote = None


def build(deployment: Deployment, seams: ExecutorSeams) -> OpenAIJobExecutor:
    """The run phase's executor for a deployment of this runtime (operations/<runtime>_job.py, found by its name)."""
    return OpenAIJobExecutor(deployment, seams.connect)
