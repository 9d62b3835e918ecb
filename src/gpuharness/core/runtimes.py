"""The runtimes a deployment may run, one table of the facts every layer reads about each: its service's port, health
route, process and log, whether it has a host of ours, where its jobs keep their outputs.

Each runtime declares its own entry beside its client (`runtimes.declare` in runtimes/<name>), which registers it
here when imported; the core imports nothing above it, so the table is filled the first time it is read
(core.tables). A runtime's other halves are found by its name, each in its own layer: its job executor
`operations/<name>_job.py` and its simulator half `sim/<name>.py`. The published schemas' `runtime` enums are this
table's names (core.schema fills them in)."""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from types import ModuleType
from typing import Final, LiteralString, final

from gpuharness.core import tables
from gpuharness.core.tables import Table

#: what a runtime's name may be: it names a module in each layer (operations/<name>_job.py, sim/<name>.py)
NAME: Final = re.compile(r"[a-z][a-z0-9_]*")
#: the folder, under the workspace, where jobs keep their outputs unless their runtime names its own
DEFAULT_OUTPUTS: Final = "outputs"


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
    #: the folder under the workspace where its jobs keep their outputs (what retrieve reads, reap watches)
    outputs: str = DEFAULT_OUTPUTS
    #: the shutdown guard's look at its service (POSIX sh run on the pod, reading "$rt", the service's loopback
    #: URL, with `get URL`): sets busy=1 while a job is queued or running, and mark to text that changes whenever
    #: it served something (operations.guard). Empty: the guard sees no activity, only the clock.
    idle_probe: tuple[LiteralString, ...] = ()

    def __post_init__(self) -> None:
        if not NAME.fullmatch(self.name):
            raise ValueError(f"runtime name {self.name!r}: lowercase letters, digits and _ (it names modules)")
        if "/" in self.outputs or self.outputs in ("", ".", ".."):
            raise ValueError(f"runtime {self.name!r}: outputs {self.outputs!r} must be one folder name")


#: every runtime, by name, in declaration order
RUNTIMES: Final = Table[Runtime](tables.RUNTIMES)


def register(entry: Runtime) -> Runtime:
    """Add a runtime's entry to the table (once; runtimes.declare calls this beside the runtime's client)."""
    return RUNTIMES.register(entry.name, entry)


def runtime(name: str | None) -> Runtime | None:
    """The table's entry for a deployment's runtime (None: no runtime, or one this version does not know)."""
    return RUNTIMES.get(name) if name is not None else None


def names() -> tuple[str, ...]:
    """Every runtime's name, in the table's order (the CLI's choices, the schemas' enums)."""
    return tuple(RUNTIMES)


def generating() -> tuple[str, ...]:
    """The runtimes that run a test generation."""
    return tuple(name for name, entry in RUNTIMES.items() if entry.generates)


def serverless() -> str:
    """The runtime of a deployment that is a serverless endpoint: no host of ours, nothing to install or probe."""
    return next(name for name, entry in RUNTIMES.items() if not entry.has_host)


def output_folders() -> tuple[str, ...]:
    """Every folder, under a workspace, where some runtime's jobs keep their outputs."""
    return tuple(dict.fromkeys(entry.outputs for entry in RUNTIMES.values() if entry.has_host))


def half(name: str, package: str, suffix: str = "") -> ModuleType | None:
    """A runtime's half in a layer: the module `<package>.<name><suffix>` that layer keeps for it (operations'
    `comfyui_job`, the simulator's `comfyui`), or None when the layer has none. The caller names its own package: the
    core imports nothing above it by name."""
    if not NAME.fullmatch(name):
        return None
    module = f"{package}.{name}{suffix}"
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name == module:
            return None
        raise  # the half exists and something it imports does not: a bug to see, not a missing half
