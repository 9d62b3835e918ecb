"""The batched health probe: one POSIX shell script, one exec, every remote fact in marked sections."""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, Final, final

from gpuharness.remote import ExecResult, Remote

PROBE_VERSION: Final = 1
MARK: Final = "@@gpuharness"

#: Query fields, in order; the throttle reasons are asked under the new spelling first, then the old one.
BASE_FIELDS: Final = ("index", "name", "uuid", "driver_version", "memory.total", "memory.used",
                      "temperature.gpu", "utilization.gpu", "ecc.errors.uncorrected.volatile.total")
REASONS: Final = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")
PCIE_FIELDS: Final = ("pcie.link.gen.current", "pcie.link.width.current")
SPELLINGS: Final = ("clocks_event_reasons", "clocks_throttle_reasons")

#: nvidia-smi outputs that mean "no usable GPU", as error classes (first match wins).
NVIDIA_SMI_ERRORS: Final = (
    ("driver_library_mismatch", re.compile(r"Driver/library version mismatch", re.I)),
    ("driver_not_loaded", re.compile(r"couldn't communicate with the NVIDIA driver|driver not loaded", re.I)),
    ("no_devices_found", re.compile(r"No devices were found", re.I)),
    ("device_handle_unknown_error", re.compile(r"Unable to determine the device handle.*Unknown Error", re.I)),
    ("gpu_access_blocked", re.compile(r"access.*blocked|Insufficient Permissions", re.I)),
    ("gpu_fallen_off_bus", re.compile(r"fallen off the bus", re.I)),
)


def query_fields(spelling: str) -> tuple[str, ...]:
    """The --query-gpu field list under one throttle-reason spelling."""
    return (*BASE_FIELDS, *(f"{spelling}.{reason}" for reason in REASONS), *PCIE_FIELDS)


@final
@dataclass(frozen=True, slots=True)
class ProbeTargets:
    """What the probe looks at on the host, beyond the GPU."""

    workspace: str = "/workspace"
    process_pattern: str | None = None
    service_port: int | None = None
    log_path: str | None = None
    checkpoint_path: str | None = None
    output_dir: str | None = None
    nvidia_smi_timeout_s: int = 10
    torch_timeout_s: int = 60


TORCH_SMOKE: Final = """
import sys
try:
    import torch
except Exception:
    print("absent"); sys.exit(0)
if not torch.cuda.is_available():
    print("no_cuda"); sys.exit(0)
torch.manual_seed(0)
a = torch.randn(512, 512); b = torch.randn(512, 512)
cpu = a @ b
gpu = (a.cuda() @ b.cuda()).cpu()
err = float((cpu - gpu).abs().max())
print(("ok" if err < 1e-2 else "mismatch") + " max_abs_err=%.3g device=%s" % (err, torch.cuda.get_device_name(0)))
"""


def build_script(targets: ProbeTargets) -> str:
    """The probe script; parameters are passed as quoted shell variables, never interpolated into code."""
    q = shlex.quote

    def var(name: str, value: object) -> str:
        return f"{name}={q('' if value is None else str(value))}"

    lines = [
        "#!/bin/sh",
        f"# gpuharness probe v{PROBE_VERSION}: one exec, marked sections",
        "LC_ALL=C; export LC_ALL",
        var("GH_WS", targets.workspace),
        var("GH_PAT", targets.process_pattern),
        var("GH_PORT", targets.service_port),
        var("GH_LOG", targets.log_path),
        var("GH_CKPT", targets.checkpoint_path),
        var("GH_OUT", targets.output_dir),
        var("GH_T", targets.nvidia_smi_timeout_s),
        var("GH_TT", targets.torch_timeout_s),
        "export GH_PAT",
        f'sec() {{ echo "{MARK} $1"; }}',
        f'end() {{ echo "{MARK} end rc=$1"; }}',
        # `timeout` may be missing on minimal images; then run without the cut-off (recorded as such).
        'if command -v timeout >/dev/null 2>&1; then TO="timeout -k 2 $GH_T"; TOT="timeout -k 2 $GH_TT"; '
        'else TO=""; TOT=""; fi',
        "sec gpus",
        "rc=127",
        "if command -v nvidia-smi >/dev/null 2>&1; then",
        f'  echo "spelling {SPELLINGS[0]}"',
        f"  $TO nvidia-smi --query-gpu={','.join(query_fields(SPELLINGS[0]))} --format=csv,noheader,nounits 2>&1",
        "  rc=$?",
        # exit 2 is "invalid argument": drivers older than r525 only know the throttle spelling
        '  if [ "$rc" -eq 2 ]; then',
        f'    echo "spelling {SPELLINGS[1]}"',
        f"    $TO nvidia-smi --query-gpu={','.join(query_fields(SPELLINGS[1]))} --format=csv,noheader,nounits 2>&1",
        "    rc=$?",
        "  fi",
        "else echo 'nvidia-smi: command not found'; fi",
        "end $rc",
        "sec header",
        'if [ "$rc" = 0 ]; then $TO nvidia-smi 2>&1 | grep -E "Driver Version|CUDA Version"; fi; end 0',
        "sec apps",
        'if [ "$rc" = 0 ]; then $TO nvidia-smi --query-compute-apps=pid,process_name,used_memory '
        '--format=csv,noheader,nounits 2>&1; fi; end 0',
        "sec disk",
        'for d in "$GH_WS" /; do if [ -d "$d" ]; then df -Pk "$d" | tail -n 1 | '
        'awk -v p="$d" \'{print p" "$2" "$4}\'; else echo "$d missing"; fi; done; end 0',
        "sec process",
        # the pattern travels in the environment so this awk's own argv never matches it
        'if [ -n "$GH_PAT" ]; then ps -eo pid=,args= 2>/dev/null | awk \'index($0, ENVIRON["GH_PAT"])\'; fi; end 0',
        "sec ports",
        "if command -v ss >/dev/null 2>&1; then ss -Hltn 2>/dev/null; "
        "elif command -v netstat >/dev/null 2>&1; then netstat -ltn 2>/dev/null; "
        "else cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; fi; end 0",
        "sec log",
        'if [ -n "$GH_LOG" ] && [ -r "$GH_LOG" ]; then tail -n 200 "$GH_LOG"; fi; end 0',
        "sec progress",
        'if [ -n "$GH_CKPT" ] && [ -e "$GH_CKPT" ]; then echo "checkpoint $(wc -c < "$GH_CKPT")"; fi',
        'if [ -n "$GH_LOG" ] && [ -r "$GH_LOG" ]; then echo "log_bytes $(wc -c < "$GH_LOG")"; fi',
        'if [ -n "$GH_OUT" ] && [ -d "$GH_OUT" ]; then echo "outputs $(ls -1 "$GH_OUT" | wc -l)"; fi; end 0',
        "sec torch",
        "if command -v python3 >/dev/null 2>&1; then",
        f"  $TOT python3 -c {q(TORCH_SMOKE)} 2>&1 | tail -n 1",
        "else echo absent; fi; end 0",
        f'echo "{MARK} done"',
    ]
    return "\n".join(lines) + "\n"


@final
@dataclass(frozen=True, slots=True)
class GpuFacts:
    """One GPU as nvidia-smi reports it. Unsupported values ([N/A]) are None."""

    index: int
    name: str
    uuid: str
    driver_version: str
    memory_total_mib: int | None
    memory_used_mib: int | None
    temperature_c: int | None
    utilization_pct: int | None
    ecc_uncorrected: int | None
    throttle: tuple[str, ...]
    pcie_gen: int | None
    pcie_width: int | None


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

    gpus: tuple[GpuFacts, ...]
    gpu_error: str | None  # an error class: nvidia_smi_missing, nvidia_smi_hung, driver_library_mismatch, ...
    gpu_error_line: str | None
    throttle_spelling: str | None
    driver_version: str | None
    cuda_version: str | None
    compute_apps: tuple[ComputeApp, ...]
    disk_free_bytes: dict[str, int | None]
    processes: tuple[tuple[int, str], ...]
    listening_ports: frozenset[int]
    log_tail: tuple[str, ...]
    progress: dict[str, int]
    torch: str
    complete: bool
    exit_status: int | None
    digest: str
    stderr: str = ""
    sections: dict[str, list[str]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
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


def parse_gpu_line(line: str) -> GpuFacts:
    """One CSV line of query_fields(); raises ValueError when it does not have the expected shape."""
    cells = [cell.strip() for cell in line.split(",")]
    expected = len(BASE_FIELDS) + len(REASONS) + len(PCIE_FIELDS)
    if len(cells) != expected:
        # a GPU name may itself hold a comma; join the surplus back into the name
        surplus = len(cells) - expected
        if surplus < 0:
            raise ValueError(f"expected {expected} CSV fields, got {len(cells)}: {line!r}")
        cells = [cells[0], ", ".join(cells[1:2 + surplus]), *cells[2 + surplus:]]
    reasons = cells[len(BASE_FIELDS):len(BASE_FIELDS) + len(REASONS)]
    active = tuple(reason for reason, value in zip(REASONS, reasons, strict=True)
                   if (_value(value) or "").lower() == "active")
    index = _int(cells[0])
    if index is None:
        raise ValueError(f"GPU index is not a number: {line!r}")
    return GpuFacts(index=index, name=cells[1], uuid=cells[2], driver_version=cells[3],
                    memory_total_mib=_int(cells[4]), memory_used_mib=_int(cells[5]),
                    temperature_c=_int(cells[6]), utilization_pct=_int(cells[7]),
                    ecc_uncorrected=_int(cells[8]), throttle=active,
                    pcie_gen=_int(cells[-2]), pcie_width=_int(cells[-1]))


def classify_nvidia_smi(lines: list[str], rc: int | None) -> tuple[str, str | None]:
    """An error class and its decisive line for a failed nvidia-smi run."""
    if rc == 127:
        return "nvidia_smi_missing", next((line for line in lines if line.strip()), None)
    if rc in (124, 137):
        return "nvidia_smi_hung", None
    for name, pattern in NVIDIA_SMI_ERRORS:
        for line in lines:
            if pattern.search(line):
                return name, line.strip()
    return "nvidia_smi_crashed", next((line.strip() for line in lines if line.strip()), None)


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
    gpu_lines = sections.get("gpus", [])
    spelling = None
    data_lines: list[str] = []
    for line in gpu_lines:
        if line.startswith("spelling "):
            spelling = line.split(" ", 1)[1].strip()
            data_lines = []
        else:
            data_lines.append(line)
    rc = codes.get("gpus")
    gpus: list[GpuFacts] = []
    gpu_error: str | None = None
    gpu_error_line: str | None = None
    if "gpus" not in sections:
        gpu_error = "probe_incomplete"
    elif rc is None:
        gpu_error, gpu_error_line = "nvidia_smi_hung", None
    elif rc != 0:
        gpu_error, gpu_error_line = classify_nvidia_smi(data_lines, rc)
    else:
        for line in data_lines:
            if not line.strip():
                continue
            try:
                gpus.append(parse_gpu_line(line))
            except ValueError:
                gpu_error, gpu_error_line = classify_nvidia_smi(data_lines, rc)
                if gpu_error == "nvidia_smi_crashed":
                    gpu_error_line = line
                break
        if not gpus and gpu_error is None:
            gpu_error, gpu_error_line = "no_devices_found", None
    driver = cuda = None
    for line in sections.get("header", []):
        match = re.search(r"Driver Version:\s*([\d.]+)", line)
        driver = match.group(1) if match else driver
        match = re.search(r"CUDA Version:\s*([\d.]+)", line)
        cuda = match.group(1) if match else cuda
    if driver is None and gpus:
        driver = gpus[0].driver_version
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
    for line in sections.get("process", []):
        pid, _, args = line.strip().partition(" ")
        if pid.isdigit():
            processes.append((int(pid), args.strip()))
    progress: dict[str, int] = {}
    for line in sections.get("progress", []):
        key, _, value = line.partition(" ")
        if value.strip().isdigit():
            progress[key] = int(value.strip())
    torch_lines = [line for line in sections.get("torch", []) if line.strip()]
    return ProbeResult(
        gpus=tuple(gpus), gpu_error=gpu_error, gpu_error_line=gpu_error_line, throttle_spelling=spelling,
        driver_version=driver, cuda_version=cuda, compute_apps=tuple(apps), disk_free_bytes=disk,
        processes=tuple(processes), listening_ports=_listening(sections.get("ports", [])),
        log_tail=tuple(sections.get("log", [])), progress=progress,
        torch=torch_lines[-1].strip() if torch_lines else "absent", complete=done,
        exit_status=exit_status, digest=digest_of(stdout, stderr, exit_status), stderr=stderr,
        sections=sections)


def run(remote: Remote, targets: ProbeTargets, *, deadline_s: float = 120.0) -> tuple[ExecResult, ProbeResult]:
    """Send the probe in one exec and parse what came back."""
    result = remote.exec(build_script(targets), deadline_s=deadline_s)
    return result, parse(result.stdout, result.stderr, result.exit_status)
