"""What a healthy deployment looks like, judged from one ProbeResult: each rule returns a Verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, final

from gpuharness.health.diagnose import classify_lines
from gpuharness.health.gpu_classes import GPU_MEMORY_MIB, ORDER_NAMES
from gpuharness.health.nvidia_smi import ERROR_REMEDIES, HARMFUL_CLOCK_EVENTS
from gpuharness.health.probe import ProbeResult

RUNTIME_DEFAULTS: Final[dict[str, tuple[str, int]]] = {
    "comfyui": ("main.py", 8188), "openai": ("vllm", 8000),
}
GIB: Final = 1024**3


@final
@dataclass(frozen=True, slots=True)
class Verdict:
    """ok, or a failure with a classified cause and one actionable message."""

    ok: bool
    message: str
    cause: str | None = None
    skip: bool = False


def passed(message: str) -> Verdict:
    return Verdict(True, message)


def failed(cause: str, message: str) -> Verdict:
    return Verdict(False, message, cause)


def skipped(message: str) -> Verdict:
    return Verdict(True, message, None, skip=True)


def ordered_name(ordered: str) -> str:
    """The nvidia-smi name of what was ordered ("RTX 4090" -> "NVIDIA GeForce RTX 4090")."""
    return ORDER_NAMES.get(ordered.strip().lower(), ordered.strip())


def _tokens(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.lower())) - {"nvidia", "geforce", "tesla"}


def name_matches(ordered: str, actual: str) -> bool:
    want = ordered_name(ordered)
    return want.lower() == actual.lower() or _tokens(want) <= _tokens(actual)


def version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in re.findall(r"\d+", text))


def gpu_error(probe: ProbeResult) -> Verdict | None:
    if probe.gpu_error is None:
        return None
    remedy = ERROR_REMEDIES.get(probe.gpu_error, "treat the GPU as unhealthy: replace the instance")
    line = f" ({probe.gpu_error_line})" if probe.gpu_error_line else ""
    return failed(probe.gpu_error, f"nvidia-smi failed: {probe.gpu_error}{line}; {remedy}")


def gpu_matches_order(probe: ProbeResult, deployment: dict[str, Any]) -> Verdict:
    """GPU count, name and memory match what was ordered."""
    error = gpu_error(probe)
    if error:
        return error
    ordered = deployment.get("gpu")
    count = int(deployment.get("gpu_count") or 1)
    names = [gpu.name or "?" for gpu in probe.gpus]
    if len(probe.gpus) != count:
        return failed("gpu_count", f"ordered {count} x {ordered}, the host shows {len(probe.gpus)}: {names}; "
                      "a GPU is missing or hidden from the container: replace the instance (do not pay for it)")
    if ordered:
        wrong = [name for name in names if not name_matches(ordered, name)]
        if wrong:
            return failed("gpu_model", f"ordered {ordered}, the host has {wrong[0]}; "
                          "the provider gave a different GPU: destroy it and order again (or dispute the charge)")
        expected = GPU_MEMORY_MIB.get(ordered_name(ordered))
        for gpu in probe.gpus:
            if expected and gpu.memory_total_mib is not None and gpu.memory_total_mib < expected * 0.95:
                return failed("gpu_memory", f"GPU {gpu.index} ({gpu.name}) has {gpu.memory_total_mib} MiB, the "
                              f"{ordered} has {expected} MiB; a cut-down or MIG slice: replace the instance")
    return passed(f"{count} x {names[0] if names else ordered}")


def minimums(model: dict[str, Any] | None, workflow: dict[str, Any] | None) -> tuple[str | None, str | None]:
    """The highest min_driver and min_cuda the model and the workflow ask for."""
    drivers = [d for d in ((model or {}).get("min_driver"), (workflow or {}).get("min_driver")) if d]
    cudas = [c for c in ((model or {}).get("min_cuda"), (workflow or {}).get("min_cuda")) if c]
    return (max(drivers, key=version_tuple) if drivers else None, max(cudas, key=version_tuple) if cudas else None)


def driver_and_cuda(probe: ProbeResult, min_driver: str | None, min_cuda: str | None) -> Verdict:
    error = gpu_error(probe)
    if error:
        return error
    driver, cuda = probe.driver_version, probe.cuda_version
    if min_driver and (driver is None or version_tuple(driver) < version_tuple(min_driver)):
        return failed("driver_too_old", f"driver {driver} < required {min_driver}; pick an image/host with a newer "
                      "driver, or install the torch wheel built for this driver's CUDA")
    if min_cuda and (cuda is None or version_tuple(cuda) < version_tuple(min_cuda)):
        return failed("cuda_too_old", f"the driver supports CUDA {cuda} < required {min_cuda}; pick a host whose "
                      "driver supports it, or reinstall the torch wheel that matches the image's CUDA")
    return passed(f"driver {driver}, CUDA {cuda} (minimum {min_driver or '-'} / {min_cuda or '-'})")


def no_uncorrected_ecc(probe: ProbeResult) -> Verdict:
    error = gpu_error(probe)
    if error:
        return error
    bad = [(gpu.index, gpu.ecc_uncorrected) for gpu in probe.gpus if gpu.ecc_uncorrected]
    if bad:
        return failed("ecc_uncorrected", f"uncorrected ECC errors on GPU {bad[0][0]}: {bad[0][1]}; faulty memory: "
                      "replace the instance and report it to the provider")
    return passed("no uncorrected ECC errors (or ECC not supported)")


def no_harmful_throttling(probe: ProbeResult) -> Verdict:
    error = gpu_error(probe)
    if error:
        return error
    for gpu in probe.gpus:
        harmful = sorted(set(gpu.clock_event_names) & HARMFUL_CLOCK_EVENTS)
        if harmful:
            return failed("throttling", f"GPU {gpu.index} is slowed down by {', '.join(harmful)}; overheating or a "
                          "power brake: you would pay for a slow GPU, replace the instance")
    return passed("no thermal, power-brake or HW-slowdown clock events")


def temperature_under(probe: ProbeResult, limit_c: float) -> Verdict:
    error = gpu_error(probe)
    if error:
        return error
    for gpu in probe.gpus:
        if gpu.temperature_c is not None and gpu.temperature_c >= limit_c:
            return failed("overheating", f"GPU {gpu.index} is at {gpu.temperature_c} C, policy temperature_max_c is "
                          f"{limit_c:g} C; a cooling problem: replace the instance")
    temps = [gpu.temperature_c for gpu in probe.gpus]
    return passed(f"temperatures {temps} under {limit_c:g} C")


def service_pids(probe: ProbeResult) -> set[int]:
    return {pid for pid, _ in probe.processes}


def no_foreign_compute(probe: ProbeResult) -> Verdict:
    error = gpu_error(probe)
    if error:
        return error
    ours = service_pids(probe)
    foreign = [app for app in probe.compute_apps if app.pid not in ours]
    if foreign:
        listing = ", ".join(f"pid {a.pid} {a.name} ({a.used_memory_mib} MiB)" for a in foreign)
        return failed("foreign_process", f"compute processes that are not the service use the GPU: {listing}; "
                      "someone else's job shares this GPU: stop it, or replace the instance")
    return passed(f"{len(probe.compute_apps)} compute process(es), all the service's")


def model_bytes(model: dict[str, Any] | None) -> int:
    return sum(int(f.get("size", 0)) for f in (model or {}).get("files", []))


def disk_has_room(probe: ProbeResult, workspace: str, need_bytes: int, margin_gb: float) -> Verdict:
    free = probe.disk_free_bytes.get(workspace)
    where = workspace
    if free is None:
        free, where = probe.disk_free_bytes.get("/"), "/"
    if free is None:
        return failed("disk_unknown", f"could not read free disk on {workspace} or /; check the workspace path "
                      "(ssh.workspace in deployments.json)")
    required = need_bytes + margin_gb * GIB
    if free < required:
        return failed("disk_full", f"{free / GIB:.1f} GiB free on {where}, need {required / GIB:.1f} GiB (model "
                      f"{need_bytes / GIB:.1f} GiB + margin {margin_gb:g} GiB); free space or grow the volume")
    return passed(f"{free / GIB:.1f} GiB free on {where} (need {required / GIB:.1f} GiB)")


def service_up(probe: ProbeResult, pattern: str, port: int | None) -> Verdict:
    if not probe.processes:
        return failed("service_down", f"no process matching {pattern!r} is running; start the service (see its log) "
                      "and re-run the health checks")
    if port is not None and port not in probe.listening_ports:
        return failed("port_closed", f"the service runs (pid {probe.processes[0][0]}) but nothing listens on port "
                      f"{port}; listening: {sorted(probe.listening_ports)}; check its --port/--listen flags")
    return passed(f"pid {probe.processes[0][0]} {probe.processes[0][1][:60]} listening on {port}")


def log_tail_clean(probe: ProbeResult, log_path: str | None) -> Verdict:
    if not probe.log_tail:
        return passed(f"no log lines at {log_path}" if log_path else "no runtime log configured")
    diagnosis = classify_lines(probe.log_tail)
    if diagnosis.cause != "unknown":
        return failed(diagnosis.cause, f"{log_path} line {diagnosis.line_no} of the tail: {diagnosis.line}; "
                      f"{diagnosis.remedy}")
    return passed(f"{len(probe.log_tail)} log lines, no classified failure")


def cuda_smoke(probe: ProbeResult) -> Verdict:
    result = probe.torch
    if result.startswith("ok"):
        return passed(f"matmul on the GPU matches the CPU: {result}")
    if result == "absent":
        return skipped("torch is not installed on the host: CUDA smoke test not applicable")
    if result == "no_cuda":
        return failed("driver_mismatch", "torch is installed but torch.cuda.is_available() is False; reinstall the "
                      "torch wheel that matches the image's CUDA (or fix the container's GPU access)")
    return failed("cuda_smoke", f"CUDA smoke test failed: {result}; the GPU computes wrong results or CUDA is "
                  "broken: replace the instance")


def progress_advanced(current: dict[str, int], previous: dict[str, Any] | None, previous_at: str | None) -> Verdict:
    if not current:
        return failed("no_progress_marker", "the probe found no progress marker (checkpoint_path, log or outputs); "
                      "record checkpoint_path or log_path in deployments.json")
    if previous is None:
        return skipped(f"first observation of the progress marker recorded: {current}")
    advanced = [key for key, value in current.items() if value > int(previous.get(key, -1))]
    if not advanced:
        return failed("job_stuck", f"the job made no progress since {previous_at}: marker {current} unchanged; a "
                      "stuck job burns money: inspect the log, then stop or restart it")
    return passed(f"progress: {', '.join(f'{k} {previous.get(k)} -> {current[k]}' for k in advanced)}")
