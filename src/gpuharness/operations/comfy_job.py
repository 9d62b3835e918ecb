"""Jobs on a ComfyUI runtime: POST /prompt, poll /history/{id}, outputs left on the host for retrieve."""

from __future__ import annotations

import copy
import json
import uuid
from typing import Any, final

import httpx

from gpuharness.core.deployment import Deployment
from gpuharness.operations.run import JobProgress


def apply_inputs(graph: dict[str, Any], inputs: dict[str, Any]) -> dict[str, Any]:
    """The workflow graph with each node input named like a job input replaced by the job's value."""
    result = copy.deepcopy(graph)
    for node in result.values():
        if isinstance(node, dict) and isinstance(node.get("inputs"), dict):
            for key in node["inputs"]:
                if key in inputs:
                    node["inputs"][key] = inputs[key]
    return result


@final
class ComfyJobExecutor:
    """One HTTP client to one ComfyUI endpoint for the run phase."""

    __slots__ = ("client", "deployment", "output_dir")

    def __init__(self, deployment: Deployment, *, timeout_s: float = 30.0) -> None:
        endpoint = deployment.endpoint
        if not endpoint:
            raise ValueError(f"deployment {deployment.id} has no runtime endpoint")
        self.deployment = deployment
        self.client = httpx.Client(base_url=str(endpoint), timeout=timeout_s)
        self.output_dir = f"{deployment.workspace}/output"

    def submit(self, workflow: dict[str, Any], inputs: dict[str, Any], job_id: str) -> str:
        graph = apply_inputs(dict(workflow.get("graph") or workflow["test_generation"].get("graph") or {}), inputs)
        response = self.client.post("/prompt", json={"prompt": graph, "client_id": f"gpuharness-{job_id}",
                                                      "prompt_id": str(uuid.uuid4())})
        if response.status_code != 200:
            raise RuntimeError(f"ComfyUI refused the prompt (HTTP {response.status_code}): {response.text[:2000]}")
        return str(response.json()["prompt_id"])

    def poll(self, handle: str) -> JobProgress:
        response = self.client.get(f"/history/{handle}")
        response.raise_for_status()
        entry = response.json().get(handle)
        if not entry:
            return JobProgress("running")
        status = entry.get("status") or {}
        if status.get("status_str") == "error" or not status.get("completed", True):
            return JobProgress("failed", log=json.dumps(entry.get("status")))
        outputs = []
        for node in (entry.get("outputs") or {}).values():
            for items in node.values():
                for item in items if isinstance(items, list) else []:
                    if isinstance(item, dict) and item.get("filename") and item.get("type", "output") == "output":
                        sub = f"{item['subfolder']}/" if item.get("subfolder") else ""
                        outputs.append({"name": str(item["filename"]),
                                        "remote_path": f"{self.output_dir}/{sub}{item['filename']}"})
        return JobProgress("completed", outputs=tuple(outputs))

    def cancel(self, handle: str) -> None:
        # ComfyUI: interrupt the running prompt and drop it from the queue; best effort, the ledger says cancelled
        for path, body in (("/interrupt", {"prompt_id": handle}), ("/queue", {"delete": [handle]})):
            try:
                self.client.post(path, json=body)
            except httpx.HTTPError:
                continue

    def close(self) -> None:
        self.client.close()
