"""A runtime's simulator half, declared once per runtime: how its server answers and the service process a simulated
host runs for it. A runtime's half is the module of gpuharness.sim named after it (sim/<runtime>.py), whose
`SIMULATED` is that declaration; the simulated runtime server (sim/runtimes.py) and host (sim/host.py) look a
runtime up here by its name and write none out."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol, final

from gpuharness.core.runtimes import RUNTIMES, half
from gpuharness.runtimes.comfyui.catalog import NodeCatalog

JSON: Final[str] = "application/json"
DROPPED: Final[int] = 0  # a status meaning: close the connection without an answer
#: One answer of a simulated runtime: (status, JSON value or bytes, content type).
Answer = tuple[int, Any, str]
#: What a runtime with an HTTP service of its own answers every request while its health is down.
UNHEALTHY: Final[Answer] = (503, {"error": "unhealthy", "error_type": "healthcheck"}, JSON)
#: The simulated service only waits; it ends when the process that started it is gone (no orphan outlives a test).
SERVICE_MAIN: Final[str] = """import os, time
parent = os.getppid()
while os.getppid() == parent:
    time.sleep(0.5)
"""


@final
@dataclass(frozen=True, slots=True)
class RuntimeFaults:
    """Faults a runtime can show. polls_before_done: how many /history (or /status) polls answer 'not yet'.
    ComfyUI: missing_node is a class whose custom node failed to import (absent from the catalog); missing_model
    hides the model files; corrupt_checkpoint makes the checkpoint loader raise SafetensorError; oom raises a
    CUDA OOM in the sampler. served_output is (name suffix, bytes) a hostile runtime serves in place of its real
    output: ComfyUI saves it as each image (`<prefix>_00001_<suffix>`), an OpenAI-compatible server answers a
    completion with the bytes (sim.output_faults has the named ones)."""

    oom: bool = False
    missing_node: str | None = None
    missing_model: bool = False
    corrupt_checkpoint: bool = False
    health_down: bool = False
    empty_output: bool = False
    never_finishes: bool = False
    wrong_model: bool = False
    polls_before_done: int = 1
    hostile_names: tuple[tuple[str, str], ...] = ()  # ComfyUI: see ComfyFaults.hostile_names
    served_output: tuple[str, bytes] | None = None


@final
@dataclass(frozen=True, slots=True)
class RuntimeSetting:
    """What a simulated runtime is given when its server starts. `faults()` reads the server's faults now (they may be
    replaced while it runs); `running()` says whether its HTTP server still runs."""

    faults: Callable[[], RuntimeFaults]
    running: Callable[[], bool]
    model: str
    output_root: Path | None
    models_root: Path | None
    catalog: NodeCatalog | None
    gpu: tuple[str, int]


class RuntimeBehaviour(Protocol):
    """One simulated runtime's routes: the answer to a request (its path without the /api prefix)."""

    def respond(self, method: str, path: str, query: Mapping[str, list[str]], body: Any) -> Answer:
        """The answer to one request."""


@final
@dataclass(frozen=True, slots=True)
class ServiceProcess:
    """The runtime's service on a simulated host: a real process of its virtual environment's interpreter (in the
    directory the table gives the runtime) that only waits (SERVICE_MAIN)."""

    #: its arguments after the interpreter (its command line, as `ps` on the host shows it)
    arguments: tuple[str, ...]
    #: what its virtual environment's site-packages holds besides torch (path -> source)
    packages: Mapping[str, str] = field(default_factory=dict)
    #: the files of its directory (name -> source)
    files: Mapping[str, str] = field(default_factory=dict)


@final
@dataclass(frozen=True, slots=True)
class SimulatedRuntime:
    """One runtime's simulator half."""

    #: its routes, made when its server starts
    behaviour: Callable[[RuntimeSetting], RuntimeBehaviour]
    #: its service on a simulated host (None: it has no host of ours)
    service: ServiceProcess | None = None
    #: a provider image naming one of these (lowercase) gets a simulated host serving this runtime
    image_words: tuple[str, ...] = ()


def half_of(name: str) -> SimulatedRuntime | None:
    """The simulator half of the table's runtime `name`: the SIMULATED of sim/<name>.py (None: it has none)."""
    module = half(name, "gpuharness.sim") if name in RUNTIMES else None
    declaration = getattr(module, "SIMULATED", None)
    if module is not None and not isinstance(declaration, SimulatedRuntime):
        raise TypeError(f"{module.__name__} is no simulator half: it declares no SimulatedRuntime as SIMULATED")
    return declaration


def simulated(name: str) -> SimulatedRuntime:
    """The simulator half of the table's runtime `name` (ValueError: the simulator has none)."""
    declaration = half_of(name)
    if declaration is None:
        raise ValueError(f"the simulator has no runtime {name!r}")
    return declaration


def hosted() -> tuple[str, ...]:
    """The runtimes a simulated host can serve (a host of ours and a simulator half), in the table's order."""
    return tuple(name for name, entry in RUNTIMES.items() if entry.has_host and half_of(name) is not None)


def service_of(name: str) -> ServiceProcess:
    """The service a simulated host runs for the runtime `name` (ValueError: no simulated host serves it)."""
    service = simulated(name).service if name in hosted() else None
    if service is None:
        raise ValueError(f"no simulated host serves runtime {name!r}: one of {', '.join(hosted())}")
    return service


def runtime_for_image(image: str | None) -> str:
    """The runtime a simulated host serves for a provider image: the first of the table's hosted runtimes whose
    image words the image names, else the first hosted runtime."""
    text = str(image or "").lower()
    names = hosted()
    return next((name for name in names if any(word in text for word in simulated(name).image_words)), names[0])
