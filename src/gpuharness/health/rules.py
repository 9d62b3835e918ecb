"""What a healthy deployment looks like, judged from one ProbeResult: each rule returns a Verdict."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, Protocol, final

from gpuharness.core.deployment import BILLING, Deployment
from gpuharness.core.policy import PerformanceFloor
from gpuharness.core.runtimes import RUNTIMES
from gpuharness.diagnose import CAUSES, REMEDIES, Diagnosis, Evidence, classify_lines
from gpuharness.gpu import peers, performance
from gpuharness.gpu.classes import GPU_MEMORY_MIB, ORDER_NAMES
from gpuharness.gpu.nvidia_smi import ERROR_REMEDIES, HARMFUL_CLOCK_EVENTS
from gpuharness.gpu.performance import PerformanceReport
from gpuharness.probe.facts import CORRUPT_REMEDY, ProbeResult
from gpuharness.probe.measuring import MeasurementRecord

GIB: Final = 1024**3


class GraphFit(Protocol):
    """What the log rule reads of a workflow's graph judged against its server's node catalog (a ComfyUI
    runtime's `workflow_fit.WorkflowFit`): whether it was judged and why not, the cause of a refusal, and what the
    server lacks."""

    @property
    def judged(self) -> bool: ...

    @property
    def note(self) -> str: ...

    @property
    def cause(self) -> str | None: ...

    @property
    def missing_classes(self) -> tuple[str, ...]: ...

    @property
    def missing_models(self) -> tuple[str, ...]: ...


@final
@dataclass(frozen=True, slots=True)
class Verdict:
    """ok, or a failure with a classified cause and one actionable message; `warnings` are findings that do not
    fail the check (shown in the report)."""

    ok: bool
    message: str
    cause: str | None = None
    skip: bool = False
    warnings: tuple[str, ...] = ()


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


def probe_corrupt(probe: ProbeResult) -> Verdict | None:
    """A failure when the probe's output cannot be believed (its framing is broken): no fact of it is judged."""
    if probe.corrupt is None:
        return None
    return failed("probe_corrupt", f"the probe's output cannot be believed: {probe.corrupt}; {CORRUPT_REMEDY}")


def gpu_error(probe: ProbeResult) -> Verdict | None:
    if probe.gpu_error is None:
        return None
    if probe.corrupt is not None:
        return probe_corrupt(probe)
    remedy = ERROR_REMEDIES.get(probe.gpu_error, "treat the GPU as unhealthy: replace the instance")
    line = f" ({probe.gpu_error_line})" if probe.gpu_error_line else ""
    return failed(probe.gpu_error, f"nvidia-smi failed: {probe.gpu_error}{line}; {remedy}")


def gpu_matches_order(probe: ProbeResult, deployment: Deployment) -> Verdict:
    """GPU count, name and memory match what was ordered."""
    error = gpu_error(probe)
    if error:
        return error
    ordered = deployment.gpu
    count = deployment.gpu_count
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
    return passed(f"pid {probe.processes[0][0]} {probe.processes[0][1][:60]} listening on {port}"
                  f"{_found_by(probe, pattern)}")


def _found_by(probe: ProbeResult, pattern: str) -> str:
    """How the probe picked the service's process (its evidence)."""
    by = probe.process_found_by
    if by is None:
        return ""
    if by.startswith("port "):
        return f" (found as the process listening on port {by.split()[1]}, by {by.split()[-1]})"
    return f" (found by the command-line pattern {pattern!r}: nothing this user can see listens on the port)"


#: Causes a log line can show on a server that still serves the workflow: an optional node module that failed to
#: import at startup, or another prompt's missing node, missing model or bad input file. Each fails the log check
#: only when the workflow needs what the server's catalog lacks (a class, a model file); otherwise it is a warning.
#: The rest (cuda_oom, driver_mismatch, weights_corrupt, disk_full) always fail: the server cannot be trusted.
JUDGED_BY_WORKFLOW: Final[dict[str, tuple[str, ...]]] = {
    "custom_node_import": ("custom_node_missing",), "custom_node_missing": ("custom_node_missing",),
    "model_missing": ("model_missing",), "bad_input": (),
}


def classified_lines(diagnosis: Diagnosis) -> dict[str, Evidence]:
    """Each label (a cause or symptom) the diagnosed lines show, with its first line (a strong one where there is
    one)."""
    found: dict[str, Evidence] = {}
    for evidence in diagnosis.evidence:
        previous = found.get(evidence.label)
        if previous is None or (evidence.strong and not previous.strong):
            found[evidence.label] = evidence
    return found


def log_tail_clean(probe: ProbeResult, log_path: str | None, fit: GraphFit | None = None) -> Verdict:
    """No classified failure in the log tail that matters to this workflow (see JUDGED_BY_WORKFLOW). `fit` is the
    workflow against a ComfyUI server's catalog; without one (another runtime) every classified cause fails."""
    if not probe.log_tail:
        return passed(f"no log lines at {log_path}" if log_path else "no runtime log configured")
    diagnosis = classify_lines(probe.log_tail)
    found = classified_lines(diagnosis)
    judged = JUDGED_BY_WORKFLOW if fit is not None else {}
    if diagnosis.cause != "unknown" and diagnosis.cause not in judged:
        return failed(diagnosis.cause, f"{log_path} line {diagnosis.line_no} of the tail: {diagnosis.line}; "
                      f"{diagnosis.remedy}")
    harmful = [label for label in found if label in CAUSES and label not in judged]
    if harmful:
        evidence = found[harmful[0]]  # a weak line, outranked by a strong harmless one in the diagnosis
        return failed(harmful[0], f"{log_path} line {evidence.line_no} of the tail: {evidence.line}; "
                      f"{_remedy(harmful[0])}")
    for label, evidence in found.items():
        if fit is not None and fit.cause is not None and fit.cause in JUDGED_BY_WORKFLOW.get(label, ()):
            needs = ", ".join(fit.missing_classes or fit.missing_models)
            # the cause is what the workflow lacks; the log line says why the server lacks it
            return failed(fit.cause, f"{log_path} line {evidence.line_no} of the tail: {evidence.line}; the "
                          f"workflow needs {needs}, which the server lacks ({label}); {_remedy(label)}")
    warnings = tuple(_harmless(label, evidence, log_path, fit) for label, evidence in found.items())
    return Verdict(True, f"{len(probe.log_tail)} log lines, no classified failure that matters to the workflow"
                   + (f" ({len(warnings)} harmless, see the warnings)" if warnings else ""), warnings=warnings)


def _remedy(label: str) -> str:
    return next((remedy for cause, remedy in REMEDIES.items() if cause == label), "")


def _harmless(label: str, evidence: Evidence, log_path: str | None, fit: GraphFit | None) -> str:
    where = f"{log_path} line {evidence.line_no}: {evidence.line} [{label}]"
    if label not in CAUSES:
        return f"{where}: a symptom, not a failure of the service"
    if fit is None or not fit.judged:
        why = fit.note if fit is not None else "no workflow graph to judge by"
        return f"{where}: not judged against the workflow ({why}); the test generation decides"
    return f"{where}: harmless to this workflow: the server's catalog has every class and model file it needs"


#: Runtimes whose service imports torch: their own interpreter must have it (a skip would pass a broken service).
TORCH_RUNTIMES: Final = frozenset(name for name, runtime in RUNTIMES.items() if runtime.imports_torch)
#: How the probe found the interpreter that ran the smoke test (probe v1 transcripts ran python3, unsaid).
FOUND_BY: Final[dict[str | None, str]] = {
    "deployment": "runtime_python in deployments.json", "service_argv0": "the service's own interpreter",
    "service_exe": "the service's own interpreter (/proc/PID/exe)", "python3": "python3 on PATH: the probe found no "
    "interpreter of the service", "none": "no python on the host", None: "python3 on PATH (probe v1)",
}


def _interpreter(probe: ProbeResult) -> str:
    smoke = probe.smoke
    return f"{smoke.interpreter or 'python3'} ({FOUND_BY.get(smoke.found_by, smoke.found_by or '?')})"


def _no_gpu(probe: ProbeResult) -> str | None:
    """Why the host has no usable GPU, where nvidia-smi says so."""
    if probe.gpu_error is not None and probe.gpu_error not in ("probe_incomplete", "nvidia_smi_timeout"):
        return f"nvidia-smi: {probe.gpu_error}" + (f" ({probe.gpu_error_line})" if probe.gpu_error_line else "")
    if probe.gpu_error is None and not probe.gpus:
        return "nvidia-smi lists no GPU"
    return None


def torch_required(probe: ProbeResult, runtime: str | None, runtime_python: str | None = None) -> str | None:
    """Why the service needs torch (so a missing torch is a finding, not a skip), or None."""
    if runtime in TORCH_RUNTIMES:
        return f"a {runtime} service imports torch"
    if probe.smoke.service_torch == "loaded":
        return "the service process has torch's libraries loaded"
    if runtime_python:
        return "deployments.json names the service's interpreter (runtime_python)"
    return None


def cuda_smoke(probe: ProbeResult, runtime: str | None = None, runtime_python: str | None = None) -> Verdict:
    """A matmul on the GPU matches the CPU, run by the service's own interpreter. A missing torch skips only where
    the service does not import it; a host without a GPU fails and says so."""
    smoke, where = probe.smoke, _interpreter(probe)
    if "torch" not in probe.sections:
        return failed("probe_incomplete", "the probe was cut off before the CUDA smoke test ran (see "
                      "test_host_reachable)")
    no_gpu = _no_gpu(probe)
    needs = torch_required(probe, runtime, runtime_python)
    if smoke.outcome in ("ok", "mismatch") and not smoke.cut_off:
        if smoke.outcome == "ok":
            return passed(f"matmul on the GPU matches the CPU in {where}: {smoke.result}")
        return failed("cuda_smoke", f"CUDA smoke test failed in {where}: {smoke.result}; the GPU computes wrong "
                      "results or CUDA is broken: replace the instance")
    if smoke.outcome == "no_cuda" and no_gpu:
        return failed("no_gpu", f"the host has no usable GPU: torch in {where} sees no CUDA device ({smoke.result}) "
                      f"and {no_gpu}; replace the instance (do not pay for it)")
    if smoke.outcome == "no_cuda":
        return failed("driver_mismatch", f"torch in {where} is installed but torch.cuda.is_available() is False "
                      f"({smoke.result}); reinstall the torch wheel that matches the image's CUDA (or fix the "
                      "container's GPU access)")
    if smoke.cut_off:
        return failed("cuda_smoke", f"the CUDA smoke test in {where} did not finish before the probe's deadline for "
                      "it (health_timeouts); CUDA hangs or the GPU is unhealthy: check it by hand, then replace the "
                      "instance")
    if smoke.outcome == "not_executable":
        return failed("runtime_python_missing", f"runtime_python in deployments.json names {smoke.interpreter}, "
                      "which is not an executable on the host; set it to the service's interpreter (the venv's "
                      "bin/python, or what /proc/<service pid>/exe names)")
    if smoke.outcome in ("absent", "no_python"):
        return _torch_absent(probe, where, needs, no_gpu)
    return failed("cuda_smoke", f"the CUDA smoke test in {where} printed {smoke.result!r} (exit "
                  f"{smoke.exit_status}); CUDA or torch is broken there: read it, fix the environment or replace "
                  "the instance")


def _torch_absent(probe: ProbeResult, where: str, needs: str | None, no_gpu: str | None) -> Verdict:
    smoke = probe.smoke
    why = smoke.result.partition(" ")[2] or "no module named torch"
    if smoke.found_by is None and no_gpu is None:
        return skipped("this recording is of probe v1, which ran the system python3, not the service's interpreter: "
                       "it cannot tell whether the service has torch; record again (--gpu-mode record)")
    if needs is None and no_gpu is None:
        return skipped(f"torch is not importable by {where} and the service does not load it: CUDA smoke test not "
                       "applicable")
    if needs is None:
        return failed("no_gpu", f"the host has no usable GPU ({no_gpu}); torch is not importable by {where} "
                      "either; replace the instance (do not pay for it)")
    if smoke.found_by in ("service_argv0", "service_exe"):
        remedy = ("the service's own environment is broken: reinstall torch into it (its pip, with the wheel "
                  "matching the image's CUDA), then restart the service")
    elif smoke.found_by == "deployment":
        remedy = ("runtime_python names an interpreter without torch: point it at the service's interpreter (the "
                  "venv's bin/python), or install torch into it")
    else:
        remedy = ("the probe could not find the service's interpreter (no service process, or its /proc entry is "
                  "unreadable): set runtime_python in deployments.json to it (e.g. /workspace/ComfyUI/venv/bin/"
                  "python)")
    return failed("torch_missing", f"{needs}, but torch is not importable by {where}: {why}; {remedy}")


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


def gpu_performs_like_its_class(probe: ProbeResult, record: MeasurementRecord | None,
                                floor: PerformanceFloor) -> tuple[Verdict, PerformanceReport]:
    """The GPU's figures against its class (gpu.performance): the link and power limit from the probe, and the
    measurement where the policy asked for one. Fails naming the figure, the expectation and the likely cause;
    skips where nothing could be judged (a GPU outside the class table); the report is the evidence."""
    error = gpu_error(probe)
    if error:
        return error, PerformanceReport(())
    ours = service_pids(probe)
    foreign = any(app.pid not in ours for app in probe.compute_apps)
    measurement = record.parse() if record is not None else None
    note: str | None
    if record is None:
        note = ("not measured: policy performance_floor.measure is off (judged on nvidia-smi's link and power "
                "facts)" if not floor.measure else "not measured: the probe's recording has no measurement")
    else:
        note = None if measurement is not None else f"not measured: {record.reason}"
    report = performance.judge(probe.gpus, measurement, floor, foreign_processes=foreign, not_measured=note)
    report = peers.with_links(report, probe.gpus, measurement, peers.links_of(probe.sections), floor)
    cause, text = performance.message(report)
    if cause is not None:
        return failed(cause, text), report
    return (passed(text) if report.judged else skipped(text)), report


def shutdown_guard_armed(probe: ProbeResult, deployment: Deployment) -> Verdict:
    """Pass where nothing bills or no rule asks for a stop; else the guard must run (rule loaded, pid alive, a
    recent heartbeat). A recorded probe from before the guard section skips, saying so."""
    rule = deployment.shutdown_rule
    if deployment.status not in BILLING or deployment.cost_hr <= 0:
        return passed(f"not billed ({deployment.status}, ${deployment.cost_hr:g}/h): nothing for a guard to stop")
    if rule is None or rule.words().startswith("NONE"):
        return passed("no shutdown rule: nothing for a guard to carry out")
    guard = probe.guard
    if guard is None:
        return skipped("the probe predates its guard section (probe v5 or earlier): probe again to see the guard")
    if guard.running:
        return passed(f"the guard runs ({guard.words()}) and carries out: {rule.words()}")
    last = f"; its log's last line: {guard.last_line}" if guard.last_line else ""
    return failed("guard_not_running", f"{deployment.id} bills ${deployment.cost_hr:g}/h with the shutdown rule "
                  f"'{rule.words()}' but no guard runs on the host ({guard.words()}){last}: re-arm it with `gpuharness "
                  f"guard {deployment.id}` (where the provider places no in-pod stop, first `gpuharness providers add "
                  f"{deployment.provider} --kind KIND --key-env VAR --guard-action shutdown --replace`), and schedule "
                  "`gpuharness reap --apply` as the second line")
