"""A simulated GPU host: an SSH server on 127.0.0.1 (paramiko's server side) whose exec runs a real /bin/sh
in a per-host sandbox, with fake `nvidia-smi`, `df`, `ps` and `ss` on PATH, an SFTP subsystem, and injectable
faults. The service is a real process: the runtime's interpreter from its own virtual environment (which has torch,
a stand-in answering the CUDA smoke test as the host's GPU would), while the system `python3` has no torch."""

from __future__ import annotations

import contextlib
import errno
import io
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, cast, final

import paramiko
from paramiko.common import AUTH_FAILED, AUTH_SUCCESSFUL, OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED, OPEN_SUCCEEDED
from paramiko.sftp import SFTP_PERMISSION_DENIED

from gpuharness.core.deployment import DEFAULT_WORKSPACE
from gpuharness.core.runtimes import DEFAULT_OUTPUTS, RUNTIMES
from gpuharness.gpu import classes
from gpuharness.gpu.nvidia_smi import CLOCK_EVENT_BITS
from gpuharness.sim import gpu_figures, gpu_topology
from gpuharness.sim.access import HostAccess
from gpuharness.sim.catalog import CATALOG, DEFAULT_GPU
from gpuharness.sim.gpu_figures import GpuBehaviour
from gpuharness.sim.in_pod import guard_env, kill_guard
from gpuharness.sim.output_faults import SIGNATURE_THEN_ZEROS, bomb_png
from gpuharness.sim.runtimes import RuntimeFaults, RuntimeServer
from gpuharness.sim.simulated_runtime import hosted, runtime_for_image, service_of

Counter = Callable[[str], None]
logging.getLogger("gpuharness.simhost").setLevel(logging.CRITICAL)
NvidiaSmiMode = Literal["ok", "missing", "hung", "driver_mismatch", "not_loaded", "no_devices"]

TorchMode = Literal["absent", "ok", "mismatch"]


@final
@dataclass(frozen=True, slots=True)
class HostSpec:
    """What the simulated host looks like, faults included. Defaults describe a healthy box with the catalog's
    default card (sim.catalog.DEFAULT_GPU)."""

    gpu: str = DEFAULT_GPU.name
    gpu_count: int = 1
    memory_total_mib: int | None = None  # None: the GPU class's
    driver: str = "570.86.15"
    cuda: str = "12.8"
    temperature_c: int = 38
    ecc_uncorrected: int = 0
    throttle: tuple[str, ...] = ()  # hw_slowdown, hw_thermal_slowdown, hw_power_brake_slowdown, ...
    old_spelling: bool = False  # a pre-r525 driver that only knows clocks_throttle_reasons
    memory_used_mib: int = 1
    foreign_processes: tuple[str, ...] = ()  # compute apps that are not the service
    disk_total_gb: float = 200.0
    disk_free_gb: float = 150.0
    runtime: str | None = hosted()[0]  # a runtime of the table a simulated host serves; the table's first by default
    service_up: bool = True
    log_lines: tuple[str, ...] = ("Starting server", "To see the GUI go to: http://0.0.0.0:8188")
    nvidia_smi: NvidiaSmiMode = "ok"
    torch: TorchMode = "ok"  # what the service's interpreter has; the system python3 never has torch
    latency_s: float = 0.0
    runtime_faults: RuntimeFaults = field(default_factory=RuntimeFaults)
    model: str = "Qwen/Qwen2.5-0.5B-Instruct"
    performance: GpuBehaviour = field(default_factory=GpuBehaviour)  # how the card departs from a healthy one
    sftp_stall_s: float = 0.0  # every SFTP read waits this long before it answers (a peer that never answers)

    def __post_init__(self) -> None:
        if self.runtime is not None:
            service_of(self.runtime)  # ValueError: no simulated host serves it


#: A startup that could not import an optional built-in node module (ComfyUI's own lines, as a ROCm image without
#: torchaudio logs them: github.com/ROCm/ROCm/issues/5405). The recorded 0.8.0 catalog lacks those classes too.
OPTIONAL_IMPORT_FAILURE: tuple[str, ...] = (
    "Cannot import /workspace/ComfyUI/comfy_extras/nodes_audio.py module for custom nodes: "
    "No module named 'torchaudio'",
    "WARNING: some comfy_extras/ nodes did not import correctly. This may be because they are missing some "
    "dependencies.",
    "IMPORT FAILED: nodes_audio.py",
    "Starting server",
    "To see the GUI go to: http://0.0.0.0:8188",
)

FAULTS: dict[str, dict[str, Any]] = {
    "oom": {"runtime_faults": RuntimeFaults(oom=True)},
    "missing_custom_node": {"runtime_faults": RuntimeFaults(missing_node="ClownsharKSampler_Beta")},
    "missing_model": {"runtime_faults": RuntimeFaults(missing_model=True)},
    "corrupt_checkpoint": {"runtime_faults": RuntimeFaults(corrupt_checkpoint=True)},
    # outputs that start right and are not what they claim: a PNG signature then zeros, a decompression bomb
    "garbage_output": {"runtime_faults": RuntimeFaults(served_output=(".png", SIGNATURE_THEN_ZEROS))},
    "bomb_output": {"runtime_faults": RuntimeFaults(served_output=(".png", bomb_png()))},
    "driver_mismatch": {"nvidia_smi": "driver_mismatch"},
    "full_disk": {"disk_free_gb": 0.2},
    "hung_nvidia_smi": {"nvidia_smi": "hung"},
    "ssh_latency": {"latency_s": 0.05},
    "optional_import_failure": {"log_lines": OPTIONAL_IMPORT_FAILURE},
    "service_without_torch": {"torch": "absent"},
    "no_gpu": {"nvidia_smi": "missing"},
    # how the card performs (sim.gpu_figures): these change `performance`, and add up with one another
    "pcie_degraded": {"performance": {"link_gen_under_load": 1}},
    "pcie_riser": {"performance": {"link_width_under_load": 4}},
    "power_capped": {"performance": {"power_limit_fraction": 0.4}},
    "underperforming": {"performance": {"busy_at_rest_pct": 97, "speed": 0.4}},
    # a pod's faults between GPUs (sim.gpu_topology; GPU 3 and GPU 5 of an 8-GPU pod)
    "nvlink_down": {"performance": {"nvlink_down": (3,)}},
    "p2p_disabled": {"performance": {"p2p_off": True}},
    "pcie_degraded_one_gpu": {"performance": {"link_gen_under_load": 1, "only_gpu": 5}},
    # the shutdown guard configure left running dies (killed when armed: sim.in_pod.kill_guard)
    "guard_killed": {},
}
#: An 8x H100 SXM pod (an HGX board: every pair joined by 18 NVLinks through NVSwitch, two NUMA nodes): the
#: catalog's NVLink card.
POD_8X_H100 = HostSpec(gpu=next(row.gpu.name for row in CATALOG if row.gpu.nvlinks), gpu_count=8)


def with_fault(spec: HostSpec, name: str) -> HostSpec:
    """The spec with one of the named faults of FAULTS injected."""
    change = dict(FAULTS[name])
    if "performance" in change:
        change["performance"] = replace(spec.performance, **change["performance"])
    return replace(spec, **change)


def _memory_total_mib(spec: HostSpec) -> int:
    """memory.total of the host's GPU: the spec's own figure, else its class's, else the default card's."""
    if spec.memory_total_mib is not None:
        return spec.memory_total_mib
    return (classes.by_name(spec.gpu) or DEFAULT_GPU).memory_mib


def _gpu_rows(spec: HostSpec, *, under_load: bool = False) -> list[dict[str, str]]:
    """What nvidia-smi --query-gpu prints of each GPU, at rest or while our measurement loads it."""
    known = classes.by_name(spec.gpu)
    total = _memory_total_mib(spec)
    has_ecc = known is not None and known.ecc
    throttle = set(spec.throttle) | ({"sw_power_cap"} if under_load and spec.performance.power_limit_fraction < 1
                                     else set())
    rows = []
    for index in range(spec.gpu_count):
        card = gpu_figures.figures(spec.gpu, gpu_figures.on_gpu(spec.performance, index))
        row = {
            "index": str(index), "name": spec.gpu, "pci.bus_id": f"00000000:{index + 1:02X}:00.0",
            "uuid": f"GPU-{uuid.uuid5(uuid.NAMESPACE_OID, f'{spec.gpu}{index}')}",
            "driver_version": spec.driver, "memory.total": str(total), "memory.used": str(spec.memory_used_mib),
            "temperature.gpu": str(spec.temperature_c),
            "ecc.errors.uncorrected.volatile.total": str(spec.ecc_uncorrected) if has_ecc or spec.ecc_uncorrected
            else "[N/A]",
            **gpu_figures.smi_values(card, under_load=under_load),
        }
        mask = sum(bit for bit, name in CLOCK_EVENT_BITS.items() if name in throttle)
        for reason in CLOCK_EVENT_BITS.values():
            state = "Active" if reason in throttle else "Not Active"
            row[f"clocks_throttle_reasons.{reason}"] = state
            if not spec.old_spelling:
                row[f"clocks_event_reasons.{reason}"] = state
        row["clocks_throttle_reasons.active"] = f"0x{mask:016X}"
        if not spec.old_spelling:
            row["clocks_event_reasons.active"] = f"0x{mask:016X}"
        rows.append(row)
    return rows


def _word(value: str) -> str:
    """A value as one shell word the fake tools print exactly (a shell word cannot hold NUL: it is left out)."""
    return shlex.quote(value.replace("\0", ""))


def _nvidia_smi_script(spec: HostSpec, service_pid: int | None, busy: Path) -> str:
    """A /bin/sh nvidia-smi: CSV queries (of one GPU with -i), the default header, compute apps and the error
    outputs. A GPU whose `busy` marker exists (our measurement's matmuls run on it) shows its figures under load.
    Values (a GPU's or a process's name) are printed as they are, with printf '%s', never interpreted."""
    q = _word
    if spec.nvidia_smi == "hung":
        return "#!/bin/sh\nexec sleep 3600\n"
    if spec.nvidia_smi == "driver_mismatch":
        return ("#!/bin/sh\necho 'Failed to initialize NVML: Driver/library version mismatch'\n"
                f"echo 'NVML library version: {spec.driver}'\nexit 18\n")
    if spec.nvidia_smi == "not_loaded":
        return ("#!/bin/sh\necho \"NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                "Make sure that the latest NVIDIA driver is installed and running.\"\nexit 9\n")
    if spec.nvidia_smi == "no_devices":
        return "#!/bin/sh\necho 'No devices were found'\nexit 6\n"
    rows = _gpu_rows(spec)
    links = _links_text(spec, [row["uuid"] for row in rows])
    cases = []
    for state, state_rows in (("rest", rows), ("load", _gpu_rows(spec, under_load=True))):
        for row in state_rows:
            arms = "\n".join(f"      {q(key)}) v={q(value)} ;;" for key, value in row.items())
            cases.append(f"    {state}{row['index']}) case \"$f\" in\n{arms}\n"
                         f"      *) echo \"Field \\\"$f\\\" is not a valid field to query.\" >&2; exit 2 ;;\n"
                         "    esac ;;")
    ids = "\n".join(f"    {q(row['index'])}|{q(row['pci.bus_id'])}|{q(row['uuid'])}) [ \"$i\" = {row['index']} ] || "
                    "continue ;;" for row in rows)
    apps = []
    if service_pid is not None:
        apps.append(f"{service_pid}, python, 20480")
    apps += [f"{5000 + i}, {name}, 4096" for i, name in enumerate(spec.foreign_processes)]
    apps_line = f"printf '%s\\n' {' '.join(q(app) for app in apps)}; " if apps else ""
    name = spec.gpu
    header = (
        "+-----------------------------------------------------------------------------------------+\n"
        f"| NVIDIA-SMI {spec.driver:<22} Driver Version: {spec.driver:<14} CUDA Version: {spec.cuda:<8}|\n"
        "|-----------------------------------------+------------------------+----------------------+\n"
        f"|   0  {name[:30]:<30}  On |   00000000:01:00.0 Off |                  Off |\n"
        "+-----------------------------------------------------------------------------------------+\n")
    return f"""#!/bin/sh
query=""; apps=""; want=""; next=""
for arg in "$@"; do
  if [ -n "$next" ]; then want="$arg"; next=""; continue; fi
  case "$arg" in
    --query-gpu=*) query="${{arg#--query-gpu=}}" ;;
    --query-compute-apps=*) apps=1 ;;
    -i|--id) next=1 ;;
    --id=*) want="${{arg#--id=}}" ;;
  esac
done
case "$1" in topo) printf '%s' {q(links[0])}; exit 0 ;; nvlink) printf '%s' {q(links[1])}; exit 0 ;; esac
if [ -n "$apps" ]; then {apps_line}exit 0; fi
if [ -z "$query" ]; then printf '%s' {q(header)}; exit 0; fi
found=""
for i in {" ".join(r["index"] for r in rows)}; do
  if [ -n "$want" ]; then
    case "$want" in
{ids}
    *) continue ;;
    esac
  fi
  found=1; state=rest
  if [ -e {q(str(busy))}/gpu-busy-$i ]; then state=load; fi
  line=""; sep=""
  old_ifs="$IFS"; IFS=","
  for f in $query; do
    IFS="$old_ifs"
    case "$state$i" in
{chr(10).join(cases)}
    esac
    line="$line$sep$v"; sep=", "
  done
  IFS="$old_ifs"
  printf '%s\\n' "$line"
done
if [ -n "$want" ] && [ -z "$found" ]; then echo "No devices were found"; exit 6; fi
"""


def _links_text(spec: HostSpec, uuids: list[str]) -> tuple[str, str]:
    """What `nvidia-smi topo -m` and `nvidia-smi nvlink --status` print of the pod (sim.gpu_topology)."""
    return (gpu_topology.topo_text(spec.gpu, spec.gpu_count, spec.performance),
            gpu_topology.nvlink_text(spec.gpu, spec.gpu_count, spec.performance, uuids))


def _fake_tools(spec: HostSpec, service_port: int | None, service: tuple[int, str] | None,
                busy: Path) -> dict[str, str]:
    """The fake tools; `service` is the running service process (pid, command line), if any; `busy` holds the
    markers of GPUs under load."""
    free_kb = int(spec.disk_free_gb * 1024 * 1024)
    total_kb = int(spec.disk_total_gb * 1024 * 1024)
    process_lines = ["    1 /bin/sh /start.sh", "   77 sshd: root@notty"]
    if service is not None:
        process_lines.append(f" {service[0]} {service[1]}")
    process_lines += [f" {5000 + i} {name}" for i, name in enumerate(spec.foreign_processes)]
    listeners = [(22, None)] + ([(service_port, service[0])] if service is not None and service_port else [])
    # as ss answers: a "sport = :N" filter keeps that port's line; -p adds the pid of a process the user owns
    ss_lines = ['want=""; pids=""',
                'for a in "$@"; do case "$a" in "sport = :"*) want=${a#"sport = :"} ;; -*p*) pids=1 ;; esac; done']
    for port, pid in listeners:
        users = f' users:(("python",pid={pid},fd=3))' if pid is not None else ""
        ss_lines.append(f'if [ -z "$want" ] || [ "$want" = {port} ]; then printf "LISTEN 0      4096         '
                        f'0.0.0.0:{port}      0.0.0.0:*"; if [ -n "$pids" ]; then printf \'{users}\'; fi; echo; fi')
    tools = {
        "nvidia-smi": _nvidia_smi_script(spec, service[0] if service is not None else None, busy),
        "df": ("#!/bin/sh\necho 'Filesystem     1024-blocks      Used Available Capacity Mounted on'\n"
               "for a in \"$@\"; do case \"$a\" in -*) ;; *) "
               f"echo \"overlay {total_kb} {total_kb - free_kb} {free_kb} 50% $a\" ;; esac; done\n"),
        "ps": "#!/bin/sh\nprintf '%s\\n' " + " ".join(_word(line) for line in process_lines) + "\n",
        "ss": "#!/bin/sh\n" + "\n".join(ss_lines) + "\n",
    }
    if spec.nvidia_smi == "missing":
        del tools["nvidia-smi"]
    return tools


def python_environment(root: Path, packages: Mapping[str, str]) -> Path:
    """A virtual environment laid out as `python -m venv --without-pip` lays it out (pyvenv.cfg, bin/python linked to
    the base interpreter, its own site-packages) holding `packages` (path in site-packages -> source); its
    bin/python. Its interpreter sees only its own packages, as a real venv's does."""
    base = Path(getattr(sys, "_base_executable", None) or sys.executable).resolve()
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    site = root / "lib" / f"python{version}" / "site-packages"
    shutil.rmtree(site, ignore_errors=True)
    site.mkdir(parents=True)
    (root / "bin").mkdir(parents=True, exist_ok=True)
    (root / "pyvenv.cfg").write_text(f"home = {base.parent}\ninclude-system-site-packages = false\n"
                                     f"version = {'.'.join(map(str, sys.version_info[:3]))}\n")
    for name in ("python", "python3"):
        link = root / "bin" / name
        if not link.is_symlink():
            link.symlink_to(base)
    for relative, source in packages.items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(source)
    return root / "bin" / "python"


def torch_stand_in(spec: HostSpec, busy: Path) -> dict[str, str]:
    """torch as the service's interpreter meets it on this host (sim/torch_package.py, configured as this card):
    CUDA only where nvidia-smi sees the GPUs, the smoke test's matmul error as the spec says, and the measurement's
    figures of the card's class and faults; `busy` is where it marks a GPU under load."""
    cards = [gpu_figures.figures(spec.gpu, gpu_figures.on_gpu(spec.performance, i)) for i in range(spec.gpu_count)]
    return gpu_figures.torch_files(
        gpu=spec.gpu, devices=spec.gpu_count if spec.nvidia_smi == "ok" else 0, total_mib=_memory_total_mib(spec),
        used_mib=spec.memory_used_mib, smoke_error=41.7 if spec.torch == "mismatch" else 3.05e-05,
        sim=gpu_figures.figures(spec.gpu, spec.performance), busy_dir=busy, per_device=cards,
        peers=gpu_topology.peers(spec.gpu, spec.gpu_count, spec.performance, cards))


class _Server(paramiko.ServerInterface):
    def __init__(self, host: SimHost) -> None:
        self.host = host
        self.tcpip: dict[int, tuple[str, int]] = {}

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            return OPEN_SUCCEEDED
        return OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple[str, int],
                                           destination: tuple[str, int]) -> int:
        if destination[0] not in {"127.0.0.1", "localhost"}:
            return OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED
        self.tcpip[chanid] = destination
        return OPEN_SUCCEEDED

    def get_allowed_auths(self, username: str) -> str:
        return "publickey"

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        if key.get_base64() in self.host.authorized:
            return AUTH_SUCCESSFUL
        return AUTH_FAILED

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        threading.Thread(target=self.host._run_exec, args=(channel, command.decode()), daemon=True).start()
        return True


class _StallingHandle(paramiko.SFTPHandle):
    """A read-only file handle whose reads first wait the host's sftp_stall_s (until the host stops)."""

    def __init__(self, flags: int, stall_s: Callable[[], float], stopping: threading.Event) -> None:
        super().__init__(flags)
        self._stall_s = stall_s
        self._stopping = stopping

    def read(self, offset: int, length: int) -> bytes | int:
        self._stopping.wait(self._stall_s())
        return super().read(offset, length)

    def stat(self) -> paramiko.SFTPAttributes | int:
        """FSTAT: the open file's own attributes (as sftp-server answers it)."""
        try:
            return paramiko.SFTPAttributes.from_stat(os.fstat(self.readfile.fileno()))  # type: ignore[attr-defined]
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)


class _SandboxSFTP(paramiko.SFTPServerInterface):
    """Read-only SFTP confined to the sandbox directory."""

    def __init__(self, server: paramiko.ServerInterface, *args: Any, root: str = "/",
                 stall_s: Callable[[], float] = lambda: 0.0, stopping: threading.Event | None = None,
                 **kwargs: Any) -> None:
        super().__init__(server, *args, **kwargs)
        self.root = os.path.realpath(root)
        self.stall_s = stall_s
        self.stopping = stopping or threading.Event()

    def _real(self, path: str) -> str | None:
        real = os.path.realpath(path if os.path.isabs(path) else os.path.join(self.root, path))
        return real if real == self.root or real.startswith(self.root + os.sep) else None

    def canonicalize(self, path: str) -> str:
        return self._real(path) or self.root

    def stat(self, path: str) -> paramiko.SFTPAttributes | int:
        real = self._real(path)
        if real is None:
            return SFTP_PERMISSION_DENIED
        try:
            return paramiko.SFTPAttributes.from_stat(os.stat(real), os.path.basename(real))
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)

    def lstat(self, path: str) -> paramiko.SFTPAttributes | int:
        """The entry itself, a link not followed (its folder resolved and confined as stat's is)."""
        full = path if os.path.isabs(path) else os.path.join(self.root, path)
        folder = self._real(os.path.dirname(full) or "/")
        name = os.path.basename(full.rstrip("/"))
        if folder is None:
            return SFTP_PERMISSION_DENIED
        try:
            return paramiko.SFTPAttributes.from_stat(os.lstat(os.path.join(folder, name) if name else folder), name)
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)

    def list_folder(self, path: str) -> list[paramiko.SFTPAttributes] | int:
        real = self._real(path)
        if real is None:
            return SFTP_PERMISSION_DENIED
        try:  # as sftp-server lists a folder: each entry lstat-ed, a link shown as a link
            return [paramiko.SFTPAttributes.from_stat(os.lstat(os.path.join(real, name)), name)
                    for name in sorted(os.listdir(real))]
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)

    def open(self, path: str, flags: int, attr: paramiko.SFTPAttributes) -> paramiko.SFTPHandle | int:
        real = self._real(path)
        if real is None or flags & (os.O_WRONLY | os.O_RDWR):
            return SFTP_PERMISSION_DENIED
        try:
            handle_file = open(real, "rb")  # closed by the SFTP handle
        except OSError as exc:
            return paramiko.SFTPServer.convert_errno(exc.errno or errno.EIO)
        handle = _StallingHandle(flags, self.stall_s, self.stopping)
        handle.filename = real  # type: ignore[attr-defined]
        handle.readfile = handle_file  # type: ignore[attr-defined]
        return handle


@final
class SimHost:
    """One simulated host. Start it standalone (`with SimHost(spec) as host:`) or from the provider
    simulator's host_factory. `stats` counts ssh_connections and ssh_execs. With `access`, it accepts that
    client key and publishes its host key in that known_hosts file while it runs."""

    def __init__(self, spec: HostSpec | None = None, *, root: str | Path | None = None,
                 counter: Counter | None = None, name: str = "simhost", access: HostAccess | None = None) -> None:
        self.spec = spec or HostSpec()
        self.name = name
        self._own_root = root is None
        self.root = Path(tempfile.mkdtemp(prefix=f"gh-{name}-") if root is None else root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.workspace = self.root / DEFAULT_WORKSPACE  # the login directory's default, as on a real host
        self.bin = self.root / "bin"
        self.counter = counter
        self.stats: dict[str, int] = {"ssh_connections": 0, "ssh_execs": 0}
        self.host_key = paramiko.ECDSAKey.generate()
        self.access = access
        self.client_key = access.client_key if access is not None else paramiko.ECDSAKey.generate()
        self.authorized = {self.client_key.get_base64()}
        self.client_key_path = self.root / "client_key"
        self.known_hosts_path = self.root / "known_hosts"
        self.runtime: RuntimeServer | None = None
        self.service: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._transports: list[paramiko.Transport] = []
        self._stopping = threading.Event()
        self.ssh_host = "127.0.0.1"
        self.ssh_port = 0
        self.armed_faults: tuple[str, ...] = ()
        self._unfaulted: HostSpec | None = None
        #: what the provider placed in the pod's environment (sim.in_pod), and the guard's minute here (None: 60 s)
        self.pod_env: dict[str, str] = {}
        self.guard_minute_s: float | None = None

    # --- lifecycle
    def start(self) -> SimHost:
        spec = self.spec
        if spec.runtime is not None:
            self.runtime = RuntimeServer(spec.runtime, faults=spec.runtime_faults, model=spec.model,
                                         output_root=self.outputs_dir, models_root=self.workspace / "models",
                                         gpu=(spec.gpu, _memory_total_mib(spec))).start()
        self.write_sandbox()
        self.client_key.write_private_key_file(str(self.client_key_path))
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        self._sock = sock
        self.ssh_port = sock.getsockname()[1]
        self.write_known_hosts(self.known_hosts_path)
        if self.access is not None:
            self.access.publish(self.known_hosts_name, self.host_key)
        thread = threading.Thread(target=self._accept_loop, name=f"{self.name}-accept", daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def place_in_pod(self, env: Mapping[str, str]) -> None:
        self.pod_env = dict(env)

    def stop_service(self) -> None:
        """The pod stopped from inside: its service and guard end, its disk and SSH stay (sim.in_pod)."""
        kill_guard(self.workspace)
        self._stop_service()
        if self.runtime is not None:
            self.runtime.stop()

    def stop(self) -> None:
        self._stopping.set()
        kill_guard(self.workspace)
        if self.access is not None and self.ssh_port:
            self.access.withdraw(self.known_hosts_name)
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() blocked in another thread
            with contextlib.suppress(OSError):
                self._sock.close()
        for transport in list(self._transports):
            transport.close()
        self._stop_service()
        if self.runtime is not None:
            self.runtime.stop()
        if self._own_root:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> SimHost:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what a deployment record needs
    @property
    def service_port(self) -> int | None:
        """The port the service listens on inside the host (8188, 8000), as `ss` there shows it."""
        return RUNTIMES[self.spec.runtime].port if self.spec.runtime is not None else None

    @property
    def http_ports(self) -> Mapping[int, int]:
        port = self.service_port
        if self.runtime is None or port is None:
            return {}
        return {port: self.runtime.port}

    @property
    def endpoint(self) -> str | None:
        return self.runtime.url if self.runtime is not None else None

    @property
    def log_path(self) -> Path:
        return self.workspace / "runtime.log"

    def ssh_block(self) -> dict[str, Any]:
        """The deployments.json `ssh` object for this host."""
        return {"host": self.ssh_host, "port": self.ssh_port, "user": "root",
                "key_file": str(self.client_key_path), "known_hosts": str(self.known_hosts_path),
                "workspace": str(self.workspace)}

    @property
    def known_hosts_name(self) -> str:
        """`[127.0.0.1]:port`, as known_hosts names a host on a port other than 22."""
        return f"[{self.ssh_host}]:{self.ssh_port}"

    def write_known_hosts(self, path: Path, key: paramiko.PKey | None = None) -> None:
        """Append this host's key (or another key, to simulate a changed host) as `[127.0.0.1]:port`."""
        key = key or self.host_key
        with path.open("a", encoding="utf-8") as handle:
            handle.write(f"{self.known_hosts_name} {key.get_name()} {key.get_base64()}\n")

    @property
    def outputs_dir(self) -> Path:
        """Where the jobs of its runtime keep their outputs (the runtime table's folder under the workspace)."""
        entry = RUNTIMES.get(self.spec.runtime) if self.spec.runtime is not None else None
        return self.workspace / (entry.outputs if entry is not None else DEFAULT_OUTPUTS)

    @property
    def service_python(self) -> Path | None:
        """The interpreter the service runs under: its virtual environment's bin/python."""
        if self.spec.runtime is None:
            return None
        return self.workspace / str(RUNTIMES[self.spec.runtime].directory) / "venv" / "bin" / "python"

    @property
    def service_pid(self) -> int | None:
        return self.service.pid if self.service is not None else None

    def _service_command(self) -> list[str]:
        assert self.spec.runtime is not None and self.service_python is not None
        return [str(self.service_python), *service_of(self.spec.runtime).arguments]

    def write_environments(self) -> None:
        """The service's virtual environment (torch as the spec says, the service's code) and the system python3,
        which has no torch."""
        python_environment(self.root / "system", {})
        spec = self.spec
        if spec.runtime is None or self.service_python is None:
            return
        service = service_of(spec.runtime)
        packages = torch_stand_in(spec, self.root) if spec.torch != "absent" else {}
        python_environment(self.service_python.parent.parent, {**packages, **service.packages})
        for name, source in service.files.items():
            (self.service_python.parent.parent.parent / name).write_text(source)

    def _start_service(self) -> None:
        if self.service is not None or self.spec.runtime is None or not self.spec.service_up:
            return
        assert self.service_python is not None
        self.service = subprocess.Popen(self._service_command(), cwd=self.service_python.parent.parent.parent,
                                        env={"PATH": f"{self.service_python.parent}:/usr/bin:/bin",
                                             "HOME": str(self.root)},
                                        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, start_new_session=True)

    def _stop_service(self) -> None:
        if self.service is not None:
            self.service.kill()
            self.service.wait()
            self.service = None

    def write_sandbox(self) -> None:
        """The host as the spec says: environments, the service process (started or stopped), fake tools, log."""
        self.workspace.mkdir(parents=True, exist_ok=True)
        self.outputs_dir.mkdir(exist_ok=True)
        self.write_environments()
        if self.spec.service_up and self.spec.runtime is not None:
            self._start_service()
        else:
            self._stop_service()
        self.bin.mkdir(exist_ok=True)
        for stale in self.bin.iterdir():
            stale.unlink()
        service = (self.service.pid, " ".join(self._service_command())) if self.service is not None else None
        for name, body in _fake_tools(self.spec, self.service_port, service, self.root).items():
            path = self.bin / name
            path.write_text(body)
            path.chmod(0o755)
        lines = list(self.spec.log_lines)
        if self.spec.runtime_faults.oom:
            lines += ["!!! Exception during processing !!! Allocation on device",
                      "torch.OutOfMemoryError: Allocation on device", "Got an OOM, unloading all loaded models."]
        if self.spec.runtime_faults.missing_node:
            lines += ["Cannot import /workspace/ComfyUI/custom_nodes/RES4LYF module for custom nodes: "
                      "No module named 'pywt'",
                      "   0.4 seconds (IMPORT FAILED): /workspace/ComfyUI/custom_nodes/RES4LYF"]
        self.log_path.write_text("".join(line + "\n" for line in lines))

    def reconfigure(self, spec: HostSpec) -> None:
        """Change the simulated facts (and faults) of a running host."""
        self.spec = spec
        if self.runtime is not None:
            self.runtime.faults = spec.runtime_faults
        self.write_sandbox()

    def arm_fault(self, name: str) -> tuple[str, ...]:
        """Give this running host one of FAULTS (POST /_sim/host-faults); the faults armed so far."""
        if name not in FAULTS:
            raise ValueError(f"'fault' must be one of {sorted(FAULTS)}")
        if self._unfaulted is None:
            self._unfaulted = self.spec
        self.armed_faults = (*self.armed_faults, name)
        self.reconfigure(with_fault(self.spec, name))
        if name == "guard_killed":
            kill_guard(self.workspace)
        return self.armed_faults

    def clear_faults(self) -> None:
        """Back to the host as it started, before any armed fault."""
        if self._unfaulted is not None:
            self.reconfigure(self._unfaulted)
        self._unfaulted, self.armed_faults = None, ()

    # --- SSH server
    def _count(self, name: str) -> None:
        self.stats[name] += 1
        if self.counter is not None:
            self.counter(name)

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()

    def _serve(self, conn: socket.socket) -> None:
        if self.spec.latency_s:
            time.sleep(self.spec.latency_s * 2)  # TCP + key exchange round trips
        transport = paramiko.Transport(conn)
        # a client hanging up is normal here; keep paramiko's "Socket exception" noise off stderr
        transport.set_log_channel("gpuharness.simhost")
        self._transports.append(transport)
        transport.add_server_key(self.host_key)
        transport.set_subsystem_handler("sftp", paramiko.SFTPServer, _SandboxSFTP, root=str(self.root),
                                        stall_s=lambda: self.spec.sftp_stall_s, stopping=self._stopping)
        server = _Server(self)
        try:
            transport.start_server(server=server)
        except (paramiko.SSHException, EOFError, OSError):
            return
        self._count("ssh_connections")
        while transport.is_active() and not self._stopping.is_set():
            chan = transport.accept(0.5)
            if chan is None:
                continue
            destination = server.tcpip.pop(chan.get_id(), None)
            if destination is not None:
                threading.Thread(target=_pump_tcpip, args=(chan, destination), daemon=True).start()

    def _run_exec(self, chan: paramiko.Channel, command: str) -> None:
        self._count("ssh_execs")
        if self.spec.latency_s:
            time.sleep(self.spec.latency_s)
        system_python = self.root / "system" / "bin"
        env = {"PATH": f"{self.bin}:{system_python}:/usr/local/bin:/usr/bin:/bin", "HOME": str(self.root),
               "GH_SANDBOX": str(self.root), "LANG": "C", **self.pod_env,
               **guard_env(self.endpoint, self.guard_minute_s)}
        try:
            proc = subprocess.Popen(["/bin/sh", "-c", command], cwd=self.root, env=env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            chan.sendall_stderr(f"sh: {exc}\n".encode())
            chan.send_exit_status(127)
            chan.close()
            return
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        stdout, stderr = cast(io.BufferedReader, proc.stdout), cast(io.BufferedReader, proc.stderr)
        stdin = proc.stdin

        def feed() -> None:
            with contextlib.suppress(OSError, EOFError):
                while data := chan.recv(32768):
                    stdin.write(data)
                    stdin.flush()
            with contextlib.suppress(OSError):
                stdin.close()

        def drain_err() -> None:
            with contextlib.suppress(OSError, EOFError):
                while data := stderr.read1(32768):
                    chan.sendall_stderr(data)

        threads = [threading.Thread(target=feed, daemon=True), threading.Thread(target=drain_err, daemon=True)]
        for thread in threads:
            thread.start()
        try:
            while data := stdout.read1(32768):
                chan.sendall(data)
        except OSError:
            # the client went away (its deadline passed): stop the script and everything it started
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, 9)
        threads[1].join()
        code = proc.wait()
        if code < 0:
            code = 128 - code  # killed by a signal: report it as a shell does (137 for SIGKILL)
        with contextlib.suppress(OSError, EOFError):
            chan.send_exit_status(code)
            chan.close()


def _pump_tcpip(chan: paramiko.Channel, destination: tuple[str, int]) -> None:
    """Forward a direct-tcpip channel (this host acting as a jump host) to a loopback port."""
    try:
        upstream = socket.create_connection(destination, timeout=5)
    except OSError:
        with contextlib.suppress(OSError, EOFError):
            chan.close()
        return
    upstream.settimeout(None)

    def up() -> None:
        with contextlib.suppress(OSError, EOFError):
            while data := chan.recv(32768):
                upstream.sendall(data)
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    threading.Thread(target=up, daemon=True).start()
    with contextlib.suppress(OSError, EOFError):
        while data := upstream.recv(32768):
            chan.sendall(data)
    with contextlib.suppress(OSError, EOFError):  # the client may have closed the whole transport first
        chan.close()
    upstream.close()


def host_factory(counter: Counter | None = None, base: HostSpec | None = None,
                 access: HostAccess | None = None) -> Callable[[Any], SimHost]:
    """A Simulator.host_factory: one SimHost per running instance, with the GPU it was ordered with (reached
    with `access` when given)."""

    def make(instance: Any) -> SimHost:
        spec = replace(base or HostSpec(), gpu=classes.nvidia_smi_name(str(instance.gpu)),
                       gpu_count=int(getattr(instance, "gpu_count", 1) or 1),
                       runtime=runtime_for_image(getattr(instance, "image", None)))
        return SimHost(spec, counter=counter, name=f"host-{instance.id}", access=access).start()

    return make
