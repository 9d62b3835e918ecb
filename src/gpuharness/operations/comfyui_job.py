"""Jobs on a ComfyUI runtime, through the one ComfyUI client: submit the workflow's graph with the job's inputs,
poll its history, leave the outputs on the host for retrieve."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, final

from gpuharness.core.confinement import plain_name, relative_parts, remote_path
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.operations.run import ExecutorSeams, JobProgress
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes.comfyui.client import ComfyUI, job_graph


def _graph(workflow: Mapping[str, Any]) -> Mapping[str, Any]:
    graph = workflow.get("graph") or (workflow.get("test_generation") or {}).get("graph") or {}
    return graph if isinstance(graph, Mapping) else {}


def job_inputs(workflow: Mapping[str, Any]) -> set[str]:
    """The input names a job may pass (operations.job_inputs): the workflow's `parameters`, its test generation's
    input names, and each value input exactly one graph node holds (as client.apply_inputs sets them)."""
    names = set((workflow.get("test_generation") or {}).get("inputs") or {}) | set(workflow.get("parameters") or {})
    holders: dict[str, int] = {}
    for node in _graph(workflow).values():
        values = node.get("inputs") if isinstance(node, dict) else None
        for name, value in (values.items() if isinstance(values, dict) else ()):
            if not isinstance(value, list):  # a list is a link to another node's output, not a value
                holders[name] = holders.get(name, 0) + 1
    return names | {name for name, count in holders.items() if count == 1}


def addresses(workflow: Mapping[str, Any], key: str) -> bool:
    """A key that names its node: a node id, or NODE.input."""
    graph = _graph(workflow)
    node_id, dot, _ = key.partition(".")
    return key in graph or bool(dot and node_id in graph)


@final
class ComfyJobExecutor:
    """One ComfyUI client to one endpoint for the run phase."""

    __slots__ = ("comfy", "deployment", "output_dir")

    def __init__(self, deployment: Deployment, *, timeout_s: float = 30.0, http: PhaseHttp | None = None) -> None:
        endpoint = deployment.endpoint
        if not endpoint and http is None:
            raise ValueError(f"deployment {deployment.id} has no runtime endpoint")
        self.deployment = deployment
        self.comfy = ComfyUI(http or PhaseHttp(str(endpoint), timeout_s=timeout_s))
        self.output_dir = deployment.outputs_dir

    def submit(self, workflow: dict[str, Any], inputs: dict[str, Any], job_id: str) -> str:
        """Queue the job's graph (InputError for inputs that name no single graph input, PromptRejected with the
        cause when ComfyUI refuses the graph)."""
        return self.comfy.submit(job_graph(workflow, inputs), client_id=f"gpuharness-{job_id}",
                                 prompt_id=str(uuid.uuid4()))

    def poll(self, handle: str) -> JobProgress:
        done = self.comfy.execution(handle)
        if done is None:
            return JobProgress("running")
        if not done.ok:
            return JobProgress("failed", log=done.error_text())
        outputs = []
        for item in done.outputs:
            if item.get("filename") and item.get("type", "output") == "output":
                try:  # the names come from the host: data, confined under the output folder
                    name = plain_name(str(item["filename"]), what="the runtime's output name")
                    sub = relative_parts(str(item["subfolder"]), what="the runtime's output subfolder") \
                        if item.get("subfolder") else ()
                except UserError as exc:
                    return JobProgress("failed", log=f"refused the runtime's outputs: {exc.what}")
                # an output is known by its path relative to the output folder: a/x.png and b/x.png are two
                outputs.append({"name": "/".join((*sub, name)),
                                "remote_path": remote_path(self.output_dir, *sub, name, what="the runtime's output")})
        return JobProgress("completed", outputs=tuple(outputs))

    def cancel(self, handle: str) -> None:
        # ComfyUI: interrupt the running prompt and drop it from the queue; best effort, the ledger says cancelled
        self.comfy.cancel(handle)

    def close(self) -> None:
        self.comfy.http.close()


def build(deployment: Deployment, seams: ExecutorSeams) -> ComfyJobExecutor:
    """The run phase's executor for a deployment of this runtime (operations/<runtime>_job.py, found by its name)."""
    return ComfyJobExecutor(deployment)
