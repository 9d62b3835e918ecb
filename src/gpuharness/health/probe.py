"""The batched health probe: one exec of the probe script (health.probe_script), every remote fact parsed from its
marked sections into a ProbeResult."""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass, field
from typing import Any, final

from gpuharness.health import nvidia_smi
from gpuharness.health.nvidia_smi import GpuInfo
from gpuharness.health.probe_script import MARK, PROBE_VERSION, ProbeTargets, build_script
from gpuharness.remote import ExecResult, Remote

__all__ = ["MARK", "PROBE_VERSION", "ComputeApp", "ProbeResult", "ProbeTargets", "TorchRun", "build_script",
           "digest_of", "parse", "run", "split_sections"]


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


def torch_run(lines: list[str]) -> TorchRun:
    """The torch section of a transcript (probe v1: only the result line)."""
    found_by = interpreter = service = None
    exit_status: int | None = None
    results: list[str] = []
    for raw in lines:
        line = raw.strip()
        if line.startswith("interpreter "):
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
    """Every remote fact from one probe exec, parsed; `digest` identifies the raw transcript."""

    gpus: tuple[GpuInfo, ...]
    gpu_error: str | None  # an error class of nvidia_smi.ERROR_REMEDIES (nvidia_smi_timeout, ...) or probe_incomplete
    gpu_error_line: str | None
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

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [gpu.to_json() for gpu in self.gpus]
        data["listening_ports"] = sorted(self.listening_ports)
        return data


def digest_of(stdout: str, stderr: str, exit_status: int | None) -> str:
    """sha256 over the transcript, so a report can cite exactly what was observed."""
    body = f"{exit_status}\n{stdout}\n--stderr--\n{stderr}".encode()
    return "sha256:" + hashlib.sha256(body).hexdigest()


def split_sections(stdout: str) -> tuple[dict[str, list[str]], dict[str, int], bool]:
    """Marked sections -> (lines per section, rc per section, whether the script reached its end)."""
    sections: dict[str, list[str]] = {}
    codes: dict[str, int] = {}
    current: str | None = None
    done = False
    for line in stdout.splitlines():
        if line.startswith(MARK + " "):
            word = line[len(MARK) + 1:].strip()
            if word == "done":
                done = True
            elif word.startswith("end rc=") and current is not None:
                try:
                    codes[current] = int(word[len("end rc="):])
                except ValueError:
                    codes[current] = -1
                current = None
            else:
                current = word
                sections[current] = []
            continue
        if current is not None:
            sections[current].append(line)
    return sections, codes, done


def _value(text: str) -> str | None:
    text = text.strip()
    if not text or (text.startswith("[") and text.endswith("]")) or text in {"N/A", "Not Supported"}:
        return None
    return text


def _int(text: str) -> int | None:
    value = _value(text)
    if value is None:
        return None
    match = re.match(r"-?\d+", value)
    return int(match.group()) if match else None


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


def parse(stdout: str, stderr: str = "", exit_status: int | None = 0) -> ProbeResult:
    """Parse a probe transcript into a ProbeResult."""
    sections, codes, done = split_sections(stdout)
    if "gpus" in sections and "gpus" in codes:
        report = nvidia_smi.parse_probe_csv("\n".join(sections["gpus"]))
        gpus, gpu_error, gpu_error_line = report.gpus, report.error, report.error_line
        fields = report.fields
    else:  # the script never finished its nvidia-smi section: the exec deadline cut it off
        gpus, gpu_error, gpu_error_line, fields = (), "probe_incomplete", "the probe did not finish", ()
    driver = cuda = None
    for line in sections.get("header", []):
        match = re.search(r"Driver Version:\s*([\d.]+)", line)
        driver = match.group(1) if match else driver
        match = re.search(r"CUDA Version:\s*([\d.]+)", line)
        cuda = match.group(1) if match else cuda
    if driver is None and gpus:
        driver = gpus[0].driver_version
    if cuda is None:
        cuda = nvidia_smi.cuda_version_from_header("\n".join(sections.get("header", [])))
    apps: list[ComputeApp] = []
    for line in sections.get("apps", []):
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) >= 3 and cells[0].isdigit():
            apps.append(ComputeApp(int(cells[0]), cells[1], _int(cells[2])))
    disk: dict[str, int | None] = {}
    for line in sections.get("disk", []):
        parts = line.split()
        if len(parts) == 2 and parts[1] == "missing":
            disk[parts[0]] = None
        elif len(parts) >= 3 and parts[-1].isdigit():
            disk[" ".join(parts[:-2])] = int(parts[-1]) * 1024
    processes: list[tuple[int, str]] = []
    found_by: str | None = None
    for line in sections.get("process", []):
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            processes.append((int(pid), args.strip()))
        elif pid == "found_by":
            found_by = args.strip()
    progress: dict[str, int] = {}
    for line in sections.get("progress", []):
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            progress[key] = int(value.strip())
    smoke = torch_run(sections.get("torch", []))
    if not smoke.result and smoke.exit_status is None:  # no torch section at all (a cut-off probe)
        smoke = TorchRun("absent", smoke.interpreter, smoke.found_by, smoke.service_torch)
    return ProbeResult(
        gpus=tuple(gpus), gpu_error=gpu_error, gpu_error_line=gpu_error_line, gpu_fields=tuple(fields),
        driver_version=driver, cuda_version=cuda, compute_apps=tuple(apps), disk_free_bytes=disk,
        processes=tuple(processes), listening_ports=_listening(sections.get("ports", [])),
        log_tail=tuple(sections.get("log", [])), progress=progress,
        torch=smoke.result, complete=done,
        exit_status=exit_status, digest=digest_of(stdout, stderr, exit_status), stderr=stderr,
        sections=sections, smoke=smoke, process_found_by=found_by)


def run(remote: Remote, targets: ProbeTargets, *, deadline_s: float = 120.0) -> tuple[ExecResult, ProbeResult]:
    """Send the probe in one exec and parse what came back."""
    result = remote.exec(build_script(targets), deadline_s=deadline_s)
    return result, parse(result.stdout, result.stderr, result.exit_status)
