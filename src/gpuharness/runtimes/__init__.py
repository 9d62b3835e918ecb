"""Runtime clients, one per runtime (comfyui, openai, serverless), over one HTTP seam (runtimes.http): the service
health endpoint and the workflow's test generation per runtime kind; the run phase's executors use the same
clients."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, final

import httpx

from gpuharness.health.diagnose import classify_text

if TYPE_CHECKING:
    from gpuharness.runtimes.http import RuntimeHttp

Sleep = Callable[[float], None]
Clock = Callable[[], float]


@final
@dataclass(frozen=True, slots=True)
class Artifact:
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


def get_health(client: httpx.Client | RuntimeHttp, path: str, *, hint: str = "") -> httpx.Response | Outcome:
    """GET a runtime's health route: its 200 answer, or the classified failure."""
    started = time.monotonic()
    label = "GET /" + path.lstrip("/")
    try:
        response = client.get(path)
    except httpx.HTTPError as exc:
        return transport_failure(exc, label, started=started)
    if response.status_code != 200:
        return failed("unhealthy", f"{label} answered {response.status_code}: {response.text[:200]}"
                      + (f" ({hint})" if hint else ""), started=started)
    return response


def check_expected(outputs: list[Artifact], expected: list[dict[str, Any]], *, started: float,
                   clock: Clock = time.monotonic) -> Outcome:
    """Non-empty outputs of the expected types and sizes."""
    if not outputs:
        return failed("empty_output", "the test generation finished but produced no output", started=started,
                      clock=clock)
    for item in outputs:
        if item.size == 0:
            return failed("empty_output", f"output {item.name} is empty (0 bytes)", started=started, clock=clock)
    for want in expected or []:
        kind, min_bytes = want.get("type"), int(want.get("min_bytes", 1))
        matches = [a for a in outputs if kind is None or a.content_type == kind or a.name.endswith(f".{kind}")]
        if not matches:
            got = ", ".join(f"{a.name} ({a.content_type})" for a in outputs)
            return failed("wrong_type", f"expected an output of type {kind}, got {got}", started=started, clock=clock)
        if max(a.size for a in matches) < min_bytes:
            return failed("empty_output", f"outputs of type {kind} are smaller than {min_bytes} bytes",
                          started=started, clock=clock)
    names = ", ".join(f"{a.name} ({a.size} B)" for a in outputs)
    return Outcome(True, f"produced {names}", outputs=tuple(outputs), duration_s=clock() - started)


def health(runtime: str, client: httpx.Client | RuntimeHttp, **kwargs: Any) -> Outcome:
    """The runtime's health endpoint."""
    from gpuharness.runtimes import comfyui, openai, serverless

    module = {"comfyui": comfyui, "openai": openai, "serverless": serverless}.get(runtime)
    if module is None:
        return failed("unsupported_runtime", f"no health client for runtime {runtime!r}")
    outcome: Outcome = module.health(client, **kwargs)
    return outcome


def run_test_generation(runtime: str, client: httpx.Client | RuntimeHttp, workflow: dict[str, Any], *,
                        model: str | None = None,
                        sleep: Sleep = time.sleep, clock: Clock = time.monotonic,
                        client_id: str | None = None) -> Outcome:
    """Run the workflow's test generation within its timeout and validate its output.

    A fixed client_id keeps the request body stable, so recorded runtime HTTP replays offline."""
    from gpuharness.runtimes import comfyui, openai, serverless

    spec = workflow.get("test_generation") or {}
    deadline_s = float(spec.get("timeout_s", 300))
    if runtime == "comfyui":
        return comfyui.generate(client, workflow, deadline_s=deadline_s, sleep=sleep, clock=clock,
                                client_id=client_id)
    if runtime == "openai":
        return openai.generate(client, workflow, model=model, deadline_s=deadline_s, clock=clock)
    if runtime == "serverless":
        return serverless.generate(client, workflow, deadline_s=deadline_s, sleep=sleep, clock=clock)
    return failed("unsupported_runtime", f"no test generation client for runtime {runtime!r}")
