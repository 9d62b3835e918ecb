"""Jobs on a RunPod Serverless endpoint, through the one endpoint client: /run, poll /status, cancel; outputs
are already off the workers."""

from __future__ import annotations

from typing import Any, final

from gpuharness.core.clock import now_ts
from gpuharness.core.deployment import Deployment
from gpuharness.operations.run import ExecutorSeams, JobProgress
from gpuharness.providers.factory import build_serverless
from gpuharness.providers.serverless import ServerlessEndpoint
from gpuharness.runtimes.serverless import error_text

QUEUED = ("IN_QUEUE", "IN_PROGRESS")


def outputs_of(output: Any) -> tuple[dict[str, Any], ...]:
    """Artifacts from a worker's output: every URL it names (already off the worker, so synced now)."""
    found: list[dict[str, Any]] = []

    def walk(node: Any, key: str) -> None:
        if isinstance(node, dict):
            for name, value in node.items():
                walk(value, str(name))
        elif isinstance(node, list):
            for value in node:
                walk(value, key)
        elif isinstance(node, str) and node.startswith(("https://", "http://", "s3://", "gs://")):
            found.append({"name": f"{key}-{len(found) + 1}", "uri": node, "synced_at": now_ts()})

    walk(output, "output")
    return tuple(found)


@final
class ServerlessJobExecutor:
    """One endpoint client for the run phase."""

    __slots__ = ("endpoint",)

    def __init__(self, endpoint: ServerlessEndpoint) -> None:
        self.endpoint = endpoint

    def submit(self, workflow: dict[str, Any], inputs: dict[str, Any], job_id: str) -> str:
        job = self.endpoint.run({"workflow": workflow["id"], "workflow_version": workflow["version"], **inputs})
        return job.id

    def poll(self, handle: str) -> JobProgress:
        job = self.endpoint.status(handle)
        if job is None:
            return JobProgress("failed", log=f"serverless job {handle} is unknown or its result expired")
        if job.status in QUEUED:
            return JobProgress("running", marker=job.status)
        if job.status == "COMPLETED":
            return JobProgress("completed", outputs=outputs_of(job.output), marker=job.execution_ms)
        return JobProgress("failed", log=f"serverless job {job.status}: {error_text(job)}")

    def cancel(self, handle: str) -> None:
        self.endpoint.cancel(handle)

    def close(self) -> None:
        self.endpoint.close()


def build(deployment: Deployment, seams: ExecutorSeams) -> ServerlessJobExecutor:
    """The run phase's executor for a deployment of this runtime (operations/<runtime>_job.py, found by its name)."""
    entry = seams.registry.provider(deployment.provider)
    return ServerlessJobExecutor(build_serverless(entry, deployment.instance_id or None, env=seams.env))
