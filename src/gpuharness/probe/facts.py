"""The batched health probe: one exec of the probe script (probe.script), its output read frame by frame under
the run's nonce (probe.framing), every remote fact parsed into a ProbeResult. A transcript recorded by probe
v1-v4 is read by the legacy reader (probe.legacy), and only where its recording says it is one."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Final, final

from gpuharness.gpu import nvidia_smi
from gpuharness.gpu.nvidia_smi import GpuInfo
from gpuharness.probe import framing, legacy
from gpuharness.probe.framing import Frames
from gpuharness.probe.guard_state import GuardState, guard_state
from gpuharness.probe.script import PROBE_VERSION, SECTION_NAMES, ProbeScript, ProbeTargets, build_script, section_names
from gpuharness.remote import ExecResult, Remote
from gpuharness.remote.lines import lines_of

__all__ = ["CORRUPT_REMEDY", "PROBE_VERSION", "SECTION_NAMES", "ComputeApp", "ProbeResult", "ProbeScript",
           "ProbeTargets", "TorchRun", "build_script", "digest_of", "parse", "parse_transcript", "read", "run"]

#: what to do about a probe whose output cannot be believed (ProbeResult.corrupt)
CORRUPT_REMEDY: Final = ("the host's output does not hold the probe's frames as the probe sent them: probe again; if "
                         "it stays so, the host (or something on its route) alters what it prints: check it by hand, "
                         "and do not mark it ready")
_APP_ROW: Final = re.compile(r"\s*\d+\s*,")


@final
@dataclass(frozen=True, slots=True)
class TorchRun:
    """The CUDA smoke test as the probe ran it: its result line (ok, mismatch, absent, no_cuda, no_python,
    not_executable, or what the interpreter printed last), the interpreter that ran it and how it was found
    (deployment, service_argv0, service_exe, python3, none; None in a probe v1 transcript, which ran python3),
    whether the service has torch's libraries mapped (loaded, not_loaded, unknown) and the run's exit status."""

    result: str
    interpreter: str | None = None
    found_by: str | None = None
    service_torch: str | None = None
    exit_status: int | None = None

    @property
    def outcome(self) -> str:
        """The result's first word."""
        return self.result.split(" ", 1)[0] if self.result else ""

    @property
    def cut_off(self) -> bool:
        """The probe's deadline for it (timeout -k) killed the run."""
        return self.exit_status in (124, 137)


def torch_run(lines: list[str], interpreter_path: str | None = None) -> TorchRun:
    """The torch section of a transcript, with the interpreter section's path (probe v5). Probe v1 printed only the
    result line; v2-v4 printed `interpreter <found by> <path>` in the torch section."""
    found_by = interpreter = service = None
    exit_status: int | None = None
    results: list[str] = []
    for raw in lines:
        line = raw.strip()
        if line.startswith("interpreter_by "):
            found_by = line.split(" ", 1)[1]
        elif line.startswith("interpreter "):
            _, _, rest = line.partition(" ")
            found_by, _, path = rest.partition(" ")
            interpreter = path or None
        elif line.startswith("service_torch "):
            service = line.split(" ", 1)[1]
        elif line.startswith("smoke_rc "):
            code = line.split(" ", 1)[1]
            exit_status = int(code) if code.lstrip("-").isdigit() else None
        elif line:
            results.append(line)
    if interpreter_path is not None:
        interpreter = interpreter_path or None
    return TorchRun(results[-1] if results else "", interpreter, found_by, service, exit_status)


@final
@dataclass(frozen=True, slots=True)
class ComputeApp:
    pid: int
    name: str
    used_memory_mib: int | None


@final
@dataclass(frozen=True, slots=True)
class ProbeResult:
    """Every remote fact from one probe exec, parsed; `digest` identifies the raw transcript. `corrupt` says why the
    output cannot be believed (then it holds no facts: gpu_error is probe_corrupt)."""

    gpus: tuple[GpuInfo, ...]
    gpu_error: str | None  # an error class of nvidia_smi.ERROR_REMEDIES (nvidia_smi_timeout, ...), probe_incomplete
    gpu_error_line: str | None  # or probe_corrupt
    gpu_fields: tuple[str, ...]
    driver_version: str | None
    cuda_version: str | None
    compute_apps: tuple[ComputeApp, ...]
    disk_free_bytes: dict[str, int | None]
    processes: tuple[tuple[int, str], ...]
    listening_ports: frozenset[int]
    log_tail: tuple[str, ...]
    progress: dict[str, int]
    torch: str  # the smoke test's result line (smoke.result)
    complete: bool
    exit_status: int | None
    digest: str
    stderr: str = ""
    sections: dict[str, list[str]] = field(default_factory=dict)
    smoke: TorchRun = field(default_factory=lambda: TorchRun("absent"))
    #: how the probe found the service's processes: "port N ss", "port N proc" (the pid listening on its port),
    #: "pattern" (the command-line pattern; no listener found), None (not looked for, or a probe before v4)
    process_found_by: str | None = None
    corrupt: str | None = None
    #: the shutdown guard as the probe saw it (None: a probe before the guard section, or one cut off before it)
    guard: GuardState | None = None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [gpu.to_json() for gpu in self.gpus]
        data["listening_ports"] = sorted(self.listening_ports)
        data["guard"] = self.guard.to_json() if self.guard is not None else None
        return data


def digest_of(stdout: str, stderr: str, exit_status: int | None) -> str:
    """sha256 over the transcript, so a report can cite exactly what was observed."""
    body = f"{exit_status}\n{stdout}\n--stderr--\n{stderr}".encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def parse(stdout: str, stderr: str = "", exit_status: int | None = 0, *, nonce: str,
          sections: Sequence[str] = SECTION_NAMES) -> ProbeResult:
    """Parse one probe run's output, read under its nonce (`sections`: those the run's script ran)."""
    return facts(framing.read(stdout, nonce, sections), stdout, stderr, exit_status)


def parse_transcript(stdout: str, stderr: str, exit_status: int | None, *, probe_version: int,
                     nonce: str | None) -> ProbeResult:
    """Parse a transcript as its probe version wrote it: framed under its nonce, or (a recording of probe v1-v4)
    by the legacy reader."""
    if probe_version <= legacy.LAST_MARKED_VERSION:
        frames = legacy.read_marked(stdout)
    elif not nonce:
        frames = Frames(problem=f"the transcript of probe v{probe_version} names no nonce to read it under")
    else:
        frames = framing.read(stdout, nonce, section_names(probe_version))
    return facts(frames, stdout, stderr, exit_status)


def read(script: ProbeScript, result: ExecResult) -> ProbeResult:
    """The facts of the output `script` produced."""
    return parse(result.stdout, result.stderr, result.exit_status, nonce=script.nonce, sections=script.sections)


def _first(pattern: str, lines: Sequence[str]) -> str | None:
    """The first match's group in lines: nvidia-smi prints its header before anything a GPU names."""
    compiled = re.compile(pattern)
    for line in lines:
        match = compiled.search(line)
        if match:
            return match.group(1)
    return None


def _int(text: str) -> int | None:
    text = text.strip()
    if not text or (text.startswith("[") and text.endswith("]")) or text in {"N/A", "Not Supported"}:
        return None
    match = re.match(r"-?\d+", text)
    return int(match.group()) if match else None


def _apps(lines: Sequence[str]) -> tuple[ComputeApp, ...]:
    """`pid, process_name, used_memory` rows. A process name may hold commas and newlines (it is the host's): a
    line that does not start with a pid continues the name before it, and the memory is after the last comma."""
    rows: list[list[str]] = []
    for line in lines:
        if _APP_ROW.match(line):
            rows.append([line])
        elif rows:
            rows[-1].append(line)
    apps: list[ComputeApp] = []
    for row in rows:
        pid, _, rest = "\n".join(row).partition(",")
        name, comma, used = rest.rpartition(",")
        apps.append(ComputeApp(int(pid), (name if comma else used).strip(), _int(used) if comma else None))
    return tuple(apps)


def _listening(lines: list[str]) -> frozenset[int]:
    ports: set[int] = set()
    for line in lines:
        parts = line.split()
        if not parts:
            continue
        if re.fullmatch(r"\d+:", parts[0]) and len(parts) > 3:  # /proc/net/tcp
            if parts[3] == "0A":
                ports.add(int(parts[1].rsplit(":", 1)[1], 16))
            continue
        for part in parts:
            match = re.search(r":(\d+)$", part)
            if match:  # the first host:port column is the local address (ss and netstat alike)
                ports.add(int(match.group(1)))
                break
    return frozenset(ports)


def _disk(lines: list[str]) -> dict[str, int | None]:
    disk: dict[str, int | None] = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 2 and parts[1] == "missing":
            disk[parts[0]] = None
        elif len(parts) >= 3 and parts[-1].isdigit():
            disk[" ".join(parts[:-2])] = int(parts[-1]) * 1024
    return disk


def _processes(lines: list[str]) -> tuple[tuple[tuple[int, str], ...], str | None]:
    processes: list[tuple[int, str]] = []
    found_by: str | None = None
    for line in lines:
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            processes.append((int(pid), args.strip()))
        elif pid == "found_by":
            found_by = args.strip()
    return tuple(processes), found_by


def _progress(lines: list[str]) -> dict[str, int]:
    progress: dict[str, int] = {}
    for line in lines:
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            progress[key] = int(value.strip())
    return progress


def corrupt(problem: str, stdout: str, stderr: str, exit_status: int | None) -> ProbeResult:
    """A probe whose output cannot be believed: no facts, the problem named (probe_corrupt)."""
    return ProbeResult(
        gpus=(), gpu_error="probe_corrupt", gpu_error_line=problem, gpu_fields=(), driver_version=None,
        cuda_version=None, compute_apps=(), disk_free_bytes={}, processes=(), listening_ports=frozenset(),
        log_tail=(), progress={}, torch="", complete=False, exit_status=exit_status,
        digest=digest_of(stdout, stderr, exit_status), stderr=stderr, smoke=TorchRun(""), corrupt=problem)


def facts(frames: Frames, stdout: str, stderr: str = "", exit_status: int | None = 0) -> ProbeResult:
    """The facts the frames hold (a transcript's frames, however they were read)."""
    if frames.problem is not None:
        return corrupt(frames.problem, stdout, stderr, exit_status)
    sections = {name: lines_of(frame.text) for name, frame in frames.frames.items()}
    if "gpus" in sections:
        report = nvidia_smi.parse_probe_csv("\n".join(sections["gpus"]))
        gpus, gpu_error, gpu_error_line = report.gpus, report.error, report.error_line
        fields = report.fields
    else:  # the script never finished its nvidia-smi section: the exec deadline cut it off
        gpus, gpu_error, gpu_error_line, fields = (), "probe_incomplete", "the probe did not finish", ()
    header = sections.get("header", [])
    driver = _first(r"Driver Version:\s*([\d.]+)", header)
    cuda = _first(r"CUDA Version:\s*([\d.]+)", header)
    if driver is None and gpus:
        driver = gpus[0].driver_version
    processes, found_by = _processes(sections.get("process", []))
    interpreter = frames.frames.get("interpreter")
    smoke = torch_run(sections.get("torch", []), interpreter.text if interpreter is not None else None)
    if not smoke.result and smoke.exit_status is None:  # no torch section at all (a cut-off probe)
        smoke = TorchRun("absent", smoke.interpreter, smoke.found_by, smoke.service_torch)
    return ProbeResult(
        gpus=tuple(gpus), gpu_error=gpu_error, gpu_error_line=gpu_error_line, gpu_fields=tuple(fields),
        driver_version=driver, cuda_version=cuda, compute_apps=_apps(sections.get("apps", [])),
        disk_free_bytes=_disk(sections.get("disk", [])), processes=processes,
        listening_ports=_listening(sections.get("ports", [])), log_tail=tuple(sections.get("log", [])),
        progress=_progress(sections.get("progress", [])), torch=smoke.result, complete=frames.done,
        exit_status=exit_status, digest=digest_of(stdout, stderr, exit_status), stderr=stderr,
        sections=sections, smoke=smoke, process_found_by=found_by,
        guard=guard_state(sections["guard"]) if "guard" in frames.frames else None)


def run(remote: Remote, targets: ProbeTargets, *, deadline_s: float = 120.0) -> tuple[ExecResult, ProbeResult]:
    """Send the probe in one exec, under a fresh nonce, and parse what came back."""
    script = build_script(targets)
    result = remote.exec(script.text, deadline_s=deadline_s)
    return result, read(script, result)
