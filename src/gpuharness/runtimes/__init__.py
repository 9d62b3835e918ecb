"""Runtime clients, one home per runtime (runtimes/<name>), over one HTTP seam (remote.http): the service's health
endpoint and the workflow's test generation, dispatched by runtime; the run phase's executors use the same clients.
Each runtime's module declares its entry in the runtime table together with its client's two functions,
`health(client, **kwargs)` and `generate(client, workflow, request)` (`declare`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, final

import httpx

from gpuharness.core.runtimes import RUNTIMES, Runtime, register
from gpuharness.core.secrets import clip
from gpuharness.diagnose import classify_text
from gpuharness.runtimes.outputs import Served, judge, shortfall

if TYPE_CHECKING:
    from gpuharness.remote.http import PhaseHttp

Sleep = Callable[[float], None]
Clock = Callable[[], float]


@final
@dataclass(frozen=True, slots=True)
class Artifact:
    """An output that counts: its bytes decoded fully as content_type (only check_expected makes one)."""

    name: str
    content_type: str
    size: int


@final
@dataclass(frozen=True, slots=True)
class Outcome:
    """The result of a health call or a test generation. `cause` classifies a failure."""

    ok: bool
    message: str
    cause: str | None = None
    remedy: str | None = None
    outputs: tuple[Artifact, ...] = ()
    duration_s: float = 0.0
    detail: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "message": self.message, "cause": self.cause, "remedy": self.remedy,
                "outputs": [{"name": a.name, "content_type": a.content_type, "size": a.size} for a in self.outputs],
                "duration_s": round(self.duration_s, 3)}


def failed(cause: str, message: str, *, remedy: str | None = None, started: float | None = None,
           clock: Clock = time.monotonic, **detail: Any) -> Outcome:
    return Outcome(False, message, cause, remedy, (), clock() - started if started is not None else 0.0, detail)


def classified(text: str, fallback: str, message: str, *, started: float, clock: Clock = time.monotonic) -> Outcome:
    """A runtime error message, classified by the failure-log classifier (cuda_oom, driver_mismatch, ...)."""
    diagnosis = classify_text(text)
    cause = diagnosis.cause if diagnosis.cause != "unknown" else fallback
    remedy = diagnosis.remedy if diagnosis.cause != "unknown" else None
    return Outcome(False, message, cause, remedy, (), clock() - started, {"decisive_line": diagnosis.line})


def transport_failure(exc: httpx.HTTPError, what: str, *, started: float, clock: Clock = time.monotonic) -> Outcome:
    if isinstance(exc, httpx.TimeoutException):
        return failed("timeout", f"{what}: the runtime did not answer in time ({type(exc).__name__})",
                      started=started, clock=clock)
    return failed("unreachable", f"{what}: {type(exc).__name__}: {exc} (is the service running and its port "
                  "exposed?)", started=started, clock=clock)


def get_health(client: httpx.Client | PhaseHttp, path: str, *, hint: str = "") -> httpx.Response | Outcome:
    """GET a runtime's health route: its 200 answer, or the classified failure."""
    started = time.monotonic()
    label = "GET /" + path.lstrip("/")
    try:
        response = client.get(path)
    except httpx.HTTPError as exc:
        return transport_failure(exc, label, started=started)
    if response.status_code != 200:
        return failed("unhealthy", f"{label} answered {response.status_code}: {clip(response.text, 200)}"
                      + (f" ({hint})" if hint else ""), started=started)
    return response


def check_expected(served: Sequence[Served], expected: Sequence[Mapping[str, Any]], *, started: float,
                   clock: Clock = time.monotonic) -> Outcome:
    """The test generation's outputs, each judged on its bytes (runtimes.outputs), held against its
    expected_outputs: the outcome lists the outputs that count."""
    verdicts = [judge(item) for item in served]
    refusal = shortfall(verdicts, expected)
    if refusal is not None:
        return failed(refusal.cause, refusal.reason, remedy=refusal.remedy, started=started, clock=clock)
    counted = [v for v in verdicts if v.ok]
    names = ", ".join(f"{v.name} ({v.description}, {v.size} B)" for v in counted)
    left = [v.refusal.reason for v in verdicts if v.refusal is not None]
    return Outcome(True, f"produced {names}" + (f"; not counted: {'; '.join(left)}" if left else ""),
                   outputs=tuple(Artifact(v.name, str(v.kind), v.size) for v in counted),
                   duration_s=clock() - started)


@final
@dataclass(frozen=True, slots=True)
class GenerationRequest:
    """What a client's test generation is given besides the workflow: its deadline, the time seams, the
    deployment's model (for a server that serves several) and a fixed client id (a stable request body, so
    recorded runtime HTTP replays offline)."""

    deadline_s: float
    sleep: Sleep = time.sleep
    clock: Clock = time.monotonic
    model: str | None = None
    client_id: str | None = None


class Health(Protocol):
    """A runtime's health call: its service's answer on its health endpoint."""

    def __call__(self, client: httpx.Client | PhaseHttp, **_: Any) -> Outcome: ...


class Generate(Protocol):
    """A runtime's test generation: the workflow run once within the request's deadline, its outputs judged."""

    def __call__(self, client: httpx.Client | PhaseHttp, workflow: Mapping[str, Any],
                 request: GenerationRequest) -> Outcome: ...


@final
@dataclass(frozen=True, slots=True)
class RuntimeClient:
    """A runtime's client, as the dispatch calls it."""

    health: Health
    generate: Generate


#: each runtime's client, by the runtime's name (filled by `declare`; read after the runtime table, which loads them)
CLIENTS: Final[dict[str, RuntimeClient]] = {}


def declare(entry: Runtime, *, health: Health | None = None, generate: Generate | None = None) -> Runtime:
    """A runtime's entry in the runtime table and its client, declared once in its own module: a new runtime is
    that module (and its name in gpuharness.BUILTIN)."""
    if (health is None) != (generate is None):
        raise ValueError(f"runtime {entry.name!r}: a client has both health and generate, or neither")
    register(entry)
    if health is not None and generate is not None:
        CLIENTS[entry.name] = RuntimeClient(health, generate)
    return entry


def client_of(name: str | None) -> RuntimeClient | None:
    """The client a runtime declared (None: an unknown runtime, or one without a client)."""
    if name is None or name not in RUNTIMES:  # reading the table loads every declared runtime, clients included
        return None
    return CLIENTS.get(name)


def health(runtime: str, client: httpx.Client | PhaseHttp, **kwargs: Any) -> Outcome:
    """The runtime's health endpoint."""
    found = client_of(runtime)
    if found is None:
        return failed("unsupported_runtime", f"no health client for runtime {runtime!r}")
    return found.health(client, **kwargs)


def run_test_generation(runtime: str, client: httpx.Client | PhaseHttp, workflow: dict[str, Any], *,
                        model: str | None = None,
                        sleep: Sleep = time.sleep, clock: Clock = time.monotonic,
                        client_id: str | None = None) -> Outcome:
    """Run the workflow's test generation within its timeout and validate its output.

    A fixed client_id keeps the request body stable, so recorded runtime HTTP replays offline."""
    found = client_of(runtime)
    if found is None:
        return failed("unsupported_runtime", f"no test generation client for runtime {runtime!r}")
    spec = workflow.get("test_generation") or {}
    request = GenerationRequest(float(spec.get("timeout_s", 300)), sleep=sleep, clock=clock, model=model,
                                client_id=client_id)
    return found.generate(client, workflow, request)
