"""The runtimes a deployment may run, each declared once: what the rest of the harness knows about a runtime (its
service's port, health route, process, log, whether it has a host of ours) is read from this table.

The published schema (deployments.schema.json's `runtime` enum) stays the contract; tests/test_runtime_table.py
proves the two agree. A runtime's HTTP client is the module of `gpuharness.runtimes` its entry names (`client`), the
run phase's executor the module of `gpuharness.operations` (`executor`), its stand-in the module of `gpuharness.sim`
(`simulator`).
The table holds module names, never modules: the core imports no layer above it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, final


@final
@dataclass(frozen=True, slots=True)
class Runtime:
    """One runtime: its name in deployments.json and the facts every layer reads about it."""

    name: str
    #: the port its service listens on unless the deployment says (service_port)
    port: int | None = None
    #: the route its client asks for health (None: no HTTP service of its own)
    health_path: str | None = None
    #: a command-line pattern its service process matches (the probe's fallback when no process listens on port)
    process: str | None = None
    #: where its service writes its log, relative to the workspace (None: the deployment's log_path only)
    log_path: str | None = None
    #: whether the deployment has a host of ours (SSH or local) to install, probe and retrieve from
    has_host: bool = True
    #: whether its service imports torch (so its interpreter must have it)
    imports_torch: bool = False
    #: whether its server publishes a node catalog the workflow is judged against (GET /object_info)
    node_catalog: bool = False
    #: whether it runs a workflow's test generation (the run phase and `workflow add --runtime`)
    generates: bool = True
    #: the directory its service runs in, under the workspace (the simulator lays it out there)
    directory: str | None = None
    #: its client's module in gpuharness.runtimes: `health(client, **kwargs)` and `generate(client, workflow,
    #: request)` (None: no client; its health and test generation are unsupported)
    client: str | None = None
    #: its run phase's executor module in gpuharness.operations: `build(deployment, seams)` (None: no jobs)
    executor: str | None = None
    #: its simulator half's module in gpuharness.sim: `SIMULATED`, its routes and its service on a simulated host
    #: (None: the simulator has no stand-in for it)
    simulator: str | None = None


RUNTIMES: Final[dict[str, Runtime]] = {runtime.name: runtime for runtime in (
    Runtime("comfyui", port=8188, health_path="/system_stats", process="main.py", imports_torch=True,
            node_catalog=True, directory="ComfyUI", client="comfyui.client", executor="comfy_job", simulator="comfyui"),
    Runtime("openai", port=8000, health_path="/health", process="vllm", directory="vllm", client="openai",
            executor="openai_job", simulator="openai"),
    Runtime("native", generates=False),
    Runtime("serverless", health_path="/health", has_host=False, client="serverless", executor="serverless_job",
            simulator="serverless"),
)}
#: every runtime's name, in the table's order (the CLI's choices)
NAMES: Final = tuple(RUNTIMES)
#: the runtimes that run a test generation
GENERATING: Final = tuple(name for name, runtime in RUNTIMES.items() if runtime.generates)
#: the runtime of a deployment that is a serverless endpoint: no host of ours, nothing to install or probe
SERVERLESS: Final = next(name for name, runtime in RUNTIMES.items() if not runtime.has_host)


def runtime(name: str | None) -> Runtime | None:
    """The table's entry for a deployment's runtime (None: no runtime, or one this version does not know)."""
    return RUNTIMES.get(name) if name is not None else None
