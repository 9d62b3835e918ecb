"""The simulated RunPod Serverless endpoint as its jobs API answers (/health, /run, /runsync, /status/<id>,
/cancel/<id>, also under /v2/<endpoint_id>/): no host of ours serves it."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Mapping
from typing import Any, Final, final

from gpuharness.sim.simulated_runtime import JSON, Answer, RuntimeSetting, SimulatedRuntime

_NO_REQUEST: Final[Answer] = (404, {"error": "request does not exist"}, JSON)


@final
class ServerlessEndpoint:
    """The jobs of one endpoint; a job finishes after the faults' polls_before_done polls of its status."""

    def __init__(self, setting: RuntimeSetting) -> None:
        self.setting = setting
        self.jobs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def job(self, body: Any, *, sync: bool = True) -> dict[str, Any]:
        """POST /runsync (answers the job as it stands) or /run (always IN_QUEUE first)."""
        job_id = f"sync-{uuid.uuid4()}" if sync else str(uuid.uuid4())
        with self.lock:
            self.jobs[job_id] = {"input": (body or {}).get("input") if isinstance(body, dict) else None, "polls": 0}
        if not sync:
            return {"id": job_id, "status": "IN_QUEUE"}
        return self.status(job_id, first=True)

    def cancel(self, job_id: str) -> dict[str, Any]:
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                return {}
            job["cancelled"] = True
        return {"id": job_id, "status": "CANCELLED"}

    def status(self, job_id: str, *, first: bool = False) -> dict[str, Any]:
        faults = self.setting.faults()
        with self.lock:
            job = self.jobs.get(job_id)
            if job is None:
                return {}
            if job.get("cancelled"):
                return {"id": job_id, "status": "CANCELLED"}
            if not first:
                job["polls"] += 1
            pending = faults.never_finishes or job["polls"] < faults.polls_before_done
        if pending:
            return {"id": job_id, "status": "IN_PROGRESS" if job["polls"] else "IN_QUEUE"}
        if faults.oom:
            error = json.dumps({"error_type": "<class 'torch.OutOfMemoryError'>",
                                "error_message": "CUDA out of memory. Tried to allocate 2.00 GiB.",
                                "error_traceback": "Traceback ...", "hostname": "sim", "worker_id": "w1"})
            return {"delayTime": 120, "error": error, "executionTime": 900, "id": job_id, "status": "FAILED",
                    "workerId": "w1"}
        output: Any = [] if faults.empty_output else [{"image": "https://example.invalid/out.png", "seed": 1}]
        return {"delayTime": 824, "executionTime": 3391, "id": job_id, "output": output, "status": "COMPLETED"}

    def health(self) -> dict[str, Any]:
        """GET /health: an unhealthy worker while the health is down (the endpoint itself still answers)."""
        if self.setting.faults().health_down:
            workers = {"idle": 0, "initializing": 0, "ready": 0, "running": 0, "throttled": 0, "unhealthy": 1}
            return {"jobs": {"completed": 0, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0},
                    "workers": workers}
        return {"jobs": {"completed": 27, "failed": 0, "inProgress": 0, "inQueue": 0, "retried": 0},
                "workers": {"idle": 1, "initializing": 0, "ready": 1, "running": 0, "throttled": 0, "unhealthy": 0}}

    def respond(self, method: str, path: str, query: Mapping[str, list[str]], body: Any) -> Answer:
        parts = [p for p in path.split("/") if p]
        if parts[:1] == ["v2"] and len(parts) >= 3:
            parts = parts[2:]  # /v2/<endpoint_id>/<op>
        op = parts[0] if parts else ""
        if op == "health":
            return 200, self.health(), JSON
        if op in ("run", "runsync") and method == "POST":
            return 200, self.job(body, sync=op == "runsync"), JSON
        if op == "status" and len(parts) == 2:
            answer = self.status(parts[1])
            return (200, answer, JSON) if answer else _NO_REQUEST
        if op == "cancel" and len(parts) == 2 and method == "POST":
            answer = self.cancel(parts[1])
            return (200, answer, JSON) if answer else _NO_REQUEST
        return 404, {"error": "not found"}, JSON


SIMULATED: Final = SimulatedRuntime(ServerlessEndpoint)
