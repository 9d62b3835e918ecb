"""The batched health probe: one POSIX shell script, one exec, every remote fact in marked sections."""

from __future__ import annotations

import hashlib
import re
import shlex
from dataclasses import asdict, dataclass, field
from typing import Any, Final, final

from gpuharness.core.deployment import DEFAULT_WORKSPACE
from gpuharness.health import nvidia_smi
from gpuharness.health.nvidia_smi import GpuInfo
from gpuharness.remote import ExecResult, Remote

PROBE_VERSION: Final = 1
MARK: Final = "@@gpuharness"

@final
@dataclass(frozen=True, slots=True)
class ProbeTargets:
    """What the probe looks at on the host, beyond the GPU."""

    workspace: str = DEFAULT_WORKSPACE
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
        "_smi_rc=127",
        nvidia_smi.probe_shell_snippet(targets.nvidia_smi_timeout_s).rstrip("\n"),
        "rc=$_smi_rc",
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
        # busybox ps has no -o: fall back to /proc/<pid>/cmdline
        'if [ -n "$GH_PAT" ]; then { ps -eo pid=,args= 2>/dev/null || for p in /proc/[0-9]*; do '
        'printf \'%s %s\\n\' "${p#/proc/}" "$(tr \'\\000\' \' \' < "$p/cmdline" 2>/dev/null)"; done; } '
        '| awk \'index($0, ENVIRON["GH_PAT"])\'; fi; end 0',
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
    torch: str
    complete: bool
    exit_status: int | None
    digest: str
    stderr: str = ""
    sections: dict[str, list[str]] = field(default_factory=dict)

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
        gpus=tuple(gpus), gpu_error=gpu_error, gpu_error_line=gpu_error_line, gpu_fields=tuple(fields),
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
