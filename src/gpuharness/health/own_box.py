"""Register this machine as an owned `local` deployment beside a runtime already running on it, as the real H200
run did (bench/real_gpu.sh; docs/gpu-calibration.md): the deployment, a policy that measures the GPUs and requires
it, and a model-free test workflow. Then the health suite in record mode writes the cassette to send back.

    python -m gpuharness.health.own_box REGISTRY WORKSPACE GPU COUNT RUNTIME PORT PYTHON LOG PROCESS ENDPOINT"""

from __future__ import annotations

import sys
from dataclasses import asdict, replace
from typing import Any, Final

from gpuharness.core.clock import utcnow
from gpuharness.core.policy import PerformanceFloor
from gpuharness.core.registry import Registry
from gpuharness.core.runtimes import RUNTIMES
from gpuharness.core.terminal import show

DEPLOYMENT_ID: Final = "dep_local_gpu"
WORKFLOW_ID: Final = "gh-device-check"
#: A node graph that needs no model: an empty image, inverted, saved (what the H200 run generated).
TEST_GRAPH: Final[dict[str, Any]] = {
    "1": {"class_type": "EmptyImage", "inputs": {"width": 512, "height": 512, "batch_size": 1, "color": 3381606}},
    "2": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}},
    "3": {"class_type": "SaveImage", "inputs": {"images": ["2", 0], "filename_prefix": "gh_health"}},
}
USAGE: Final = ("usage: python -m gpuharness.health.own_box REGISTRY WORKSPACE GPU COUNT RUNTIME PORT PYTHON LOG "
                "PROCESS ENDPOINT")


def deployment(workspace: str, gpu: str, count: int, runtime: str, port: int, python: str, log: str | None,
               process: str, endpoint: str) -> dict[str, Any]:
    """The deployment record of this machine, reached over the `local` transport."""
    return {
        "id": DEPLOYMENT_ID, "provider": "owned-local", "instance_id": "this-machine", "gpu": gpu, "gpu_count": count,
        "runtime": runtime, "model": None, "workflow": WORKFLOW_ID, "endpoint": endpoint,
        "ssh": {"transport": "local", "workspace": workspace}, "status": "health-checking", "cost_hr": 0.0,
        "created_at": utcnow().strftime("%Y-%m-%dT%H:%M:%SZ"), "shutdown_rule": {"max_hours": 1},
        "owner": "own-box", "reason": "check this GPU box with gpuharness (bench/real_gpu.sh)", "service_port": port,
        **({"log_path": log} if log else {}), "process": process, "runtime_python": python,
        "labels": {"source": "bench/real_gpu.sh"},
    }


def register(root: str, workspace: str, gpu: str, count: int, runtime: str, port: int, python: str,
             log: str | None, process: str, endpoint: str) -> None:
    """Write the deployment, the measuring policy and the test workflow into the registry at `root`."""
    known = RUNTIMES.get(runtime)
    if known is None or not known.node_catalog:
        raise ValueError(f"runtime {runtime!r}: the model-free test is a node graph, for a runtime that publishes a "
                         "node catalog")
    registry = Registry(root)
    with registry.update("deployments.json") as doc:
        doc["deployments"] = [deployment(workspace, gpu, count, runtime, port, python, log, process, endpoint)]
    with registry.update("policy.json") as doc:
        floor = PerformanceFloor.from_policy(doc)
        doc["performance_floor"] = asdict(replace(floor, measure=True, require_measurement=True))
        doc["require_shutdown_rule"] = True
    with registry.update("workflows.json") as doc:
        doc["workflows"] = [{"id": WORKFLOW_ID, "version": 1, "runtime": runtime, "min_cuda": "12.4",
                             "test_generation": {"graph": TEST_GRAPH, "timeout_s": 60,
                                                 "expected_outputs": [{"type": "image/png", "min_bytes": 500}]}}]


def main(argv: list[str]) -> int:
    if len(argv) != 10 or not argv[3].isdigit() or not argv[5].isdigit():
        show(USAGE, file=sys.stderr)
        return 2
    root, workspace, gpu, count, runtime, port, python, log, process, endpoint = argv
    try:
        register(root, workspace, gpu, int(count), runtime, int(port), python, log or None, process, endpoint)
    except ValueError as exc:
        show(f"own_box: {exc}", file=sys.stderr)
        return 2
    show(f"registered {DEPLOYMENT_ID} ({count}x {gpu}, {runtime} on port {port}) in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
