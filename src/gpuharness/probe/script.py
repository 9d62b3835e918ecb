"""The batched probe's script: one POSIX sh script of framed sections (probe.framing), every remote fact in
one exec. One builder (`build_script`) assembles it from its sections (`SECTIONS`); a new fact is a new section,
never a new exec. A value the script prints goes through printf '%s' (never echo, which expands backslashes under
dash); a path the host names (the interpreter) is a section of its own, so a newline in it cannot start a line."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, final

from gpuharness.core.deployment import DEFAULT_WORKSPACE
from gpuharness.gpu import nvidia_smi
from gpuharness.probe import framing
from gpuharness.probe.guard_state import GUARD_LINES
from gpuharness.remote.script import ShellScript

#: 5: sections framed under a nonce (v1-v4 marked them with `@@gpuharness` lines: probe.legacy); 6: how the GPUs are
#: joined (topology, nvlink); 7: the shutdown guard on the pod (guard)
PROBE_VERSION: Final = 7
#: the bytes of the log's tail the probe sends (its last 200 lines, cut to their last bytes)
LOG_TAIL_BYTES: Final = 256 * 1024
#: settings that name a path a command reads (never to be taken for an option)
PATHS: Final = frozenset({"GH_WS", "GH_LOG", "GH_CKPT", "GH_OUT", "GH_PY"})


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
    runtime_python: str | None = None  # the service's interpreter, where the deployment names it


@final
@dataclass(frozen=True, slots=True)
class ProbeSection:
    """One framed section: its shell lines (POSIX sh), the exit status its frame reports (a shell word), and the
    settings it reads (shell variables, quoted into the script's preamble, never interpolated into code)."""

    name: str
    lines: tuple[str, ...]
    rc: str = "0"
    settings: tuple[tuple[str, object], ...] = ()


SectionBuilder = Callable[[ProbeTargets], ProbeSection]

#: Run by the service's interpreter: import torch, then a matmul on the GPU against the CPU. The first word of its
#: last line is the result (ok, mismatch, absent, no_cuda); the device name comes last (it has spaces). Text the
#: host supplies (an exception, a version, the device's name) is escaped, so the result stays one line.
TORCH_SMOKE: Final = """
import sys
def text(value):
    return str(value).encode("unicode_escape").decode("ascii")
try:
    import torch
except Exception as exc:
    print("absent %s: %s" % (type(exc).__name__, text(exc))); sys.exit(0)
if not torch.cuda.is_available():
    print("no_cuda devices=%d torch=%s cuda=%s" % (torch.cuda.device_count(), text(torch.__version__),
                                                    text(getattr(torch.version, "cuda", None))))
    sys.exit(0)
torch.manual_seed(0)
a = torch.randn(512, 512); b = torch.randn(512, 512)
cpu = a @ b
gpu = (a.cuda() @ b.cuda()).cpu()
err = float((cpu - gpu).abs().max())
print(("ok" if err < 1e-2 else "mismatch") + " max_abs_err=%.3g torch=%s device=%s"
      % (err, text(torch.__version__), text(torch.cuda.get_device_name(0))))
"""


def _gpus(targets: ProbeTargets) -> ProbeSection:
    snippet = nvidia_smi.probe_shell_snippet(targets.nvidia_smi_timeout_s).rstrip("\n")
    return ProbeSection("gpus", ("_smi_rc=127", snippet, "rc=$_smi_rc"), rc="$rc")


def _header(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("header", ('if [ "$rc" = 0 ]; then $TO nvidia-smi 2>&1 | grep -E '
                                   '"Driver Version|CUDA Version"; fi',))


def _apps(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("apps", ('if [ "$rc" = 0 ]; then $TO nvidia-smi --query-compute-apps=pid,process_name,'
                                 "used_memory --format=csv,noheader,nounits 2>&1; fi",))


def _topology(targets: ProbeTargets) -> ProbeSection:
    """`nvidia-smi topo -m`: the connection of each GPU pair (gpu.topology)."""
    return ProbeSection("topology", ('if [ "$rc" = 0 ]; then $TO nvidia-smi topo -m 2>&1; fi',))


def _nvlink(targets: ProbeTargets) -> ProbeSection:
    """`nvidia-smi nvlink --status`: each GPU's NVLinks, active or not (nothing on a GPU without any)."""
    return ProbeSection("nvlink", ('if [ "$rc" = 0 ]; then $TO nvidia-smi nvlink --status 2>&1; fi',))


def _disk(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("disk", (
        # df -P: "<file system> <total> <used> <available> <capacity>% <mount point>"; the numbers are the first
        # run of three integers before a percentage (a file system name with spaces does not shift them)
        'for d in "$GH_WS" /; do if [ -d "$d" ]; then printf \'%s %s\\n\' "$d" "$(df -Pk "$d" | tail -n 1 | '
        "awk '{for (i = 2; i + 3 <= NF; i++) if ($i ~ /^[0-9]+$/ && $(i + 1) ~ /^[0-9]+$/ && $(i + 2) ~ /^[0-9]+$/ "
        "&& $(i + 3) ~ /^[0-9]+%$/) {print $i \" \" $(i + 2); exit}}')\"; "
        "else printf '%s missing\\n' \"$d\"; fi; done",), settings=(("GH_WS", targets.workspace),))


#: The pids listening on $GH_PORT: ss where it works (it names the pid of the user's own processes without root),
#: else /proc/net/tcp{,6} (the LISTEN socket's inode) mapped to its pid through /proc/<pid>/fd; then their
#: descendants (a service's workers use the GPU too). Sets _lp and _by.
_LISTENER: Final[tuple[str, ...]] = (
    '_lp=""; _by=""',
    'if command -v ss >/dev/null 2>&1 && _ss=$(ss -ltnpH "sport = :$GH_PORT" 2>/dev/null); then',
    "  _lp=$(printf '%s\\n' \"$_ss\" | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -un); _by=\"port $GH_PORT ss\"",
    "else",
    "  _ino=$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk -v h=\":$(printf '%04X' \"$GH_PORT\")\" "
    "'$4 == \"0A\" && substr($2, length($2) - 4) == h && $10 != 0 {print $10}')",
    '  if [ -n "$_ino" ]; then _by="port $GH_PORT proc"',
    "    _lp=$(ls -l /proc/[0-9]*/fd 2>/dev/null | awk -v want=\" $(printf '%s ' $_ino)\" "
    "'/^\\/proc\\/[0-9]+\\/fd\\/?:$/ "
    "{split($0, d, \"/\"); pid = d[3]; next} $NF ~ /^socket:\\[[0-9]+\\]$/ {i = $NF; gsub(/[^0-9]/, \"\", i); "
    "if (index(want, \" \" i \" \")) print pid}' | sort -un); fi",
    "fi",
    'if [ -n "$_lp" ]; then',
    "  _lp=$(cat /proc/[0-9]*/stat 2>/dev/null | awk -v roots=\"$(printf '%s ' $_lp)\" "
    "'{s = $0; sub(/.*\\) /, \"\", s); "
    "split(s, f, \" \"); parent[$1] = f[2]} END {n = split(roots, q, \" \"); for (i = 1; i <= n; i++) seen[q[i]] = 1; "
    "for (i = 1; i <= n; i++) {print q[i]; for (p in parent) if (parent[p] == q[i] && !(p in seen)) "
    "{seen[p] = 1; q[++n] = p}}}')",
    "fi",
)


def _process(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("process", (
        'GH_SVC_PIDS=""; _procs=""; _lp=""; _by=""',
        # by its port first: a command-line pattern (main.py) also matches unrelated processes
        'if [ -n "$GH_PORT" ]; then',
        *("  " + line for line in _LISTENER),
        "fi",
        # a command line's NULs and newlines become spaces: no argument can start a process line of its own
        "if [ -n \"$_lp\" ]; then printf 'found_by %s\\n' \"$_by\"",
        "  _procs=$(for _p in $_lp; do printf '%s %s\\n' \"$_p\" "
        "\"$(tr '\\000\\n' '  ' < \"/proc/$_p/cmdline\" 2>/dev/null)\"; done)",
        # the pattern travels in the environment so this awk's own argv never matches it;
        # -ww: without a terminal procps cuts args at 80 columns; busybox ps has no -o: fall back to
        # /proc/<pid>/cmdline
        "elif [ -n \"$GH_PAT\" ]; then printf 'found_by pattern\\n'",
        '  _procs=$({ ps -ww -eo pid=,args= 2>/dev/null || for p in /proc/[0-9]*; do '
        'printf \'%s %s\\n\' "${p#/proc/}" "$(tr \'\\000\\n\' \'  \' < "$p/cmdline" 2>/dev/null)"; done; } '
        '| awk \'index($0, ENVIRON["GH_PAT"])\')',
        "fi",
        'if [ -n "$_procs" ]; then printf \'%s\\n\' "$_procs"; fi',
        # the torch section looks for the service's interpreter among the first few of them
        "GH_SVC_PIDS=$(printf '%s\\n' \"$_procs\" | awk '$1 ~ /^[0-9]+$/ {print $1}' | head -n 8)",
    ), settings=(("GH_PAT", targets.process_pattern), ("GH_PORT", targets.service_port)))


def _ports(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("ports", ("if command -v ss >/dev/null 2>&1; then ss -Hltn 2>/dev/null; "
                                  "elif command -v netstat >/dev/null 2>&1; then netstat -ltn 2>/dev/null; "
                                  "else cat /proc/net/tcp /proc/net/tcp6 2>/dev/null; fi",))


def _log(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("log", ('if [ -n "$GH_LOG" ] && [ -r "$GH_LOG" ]; then tail -n 200 "$GH_LOG" | '
                                'tail -c "$GH_LOG_BYTES"; fi',),
                        settings=(("GH_LOG", targets.log_path), ("GH_LOG_BYTES", LOG_TAIL_BYTES)))


def _progress(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("progress", (
        "if [ -n \"$GH_CKPT\" ] && [ -e \"$GH_CKPT\" ]; then printf 'checkpoint %s\\n' \"$(wc -c < \"$GH_CKPT\")\"; fi",
        "if [ -n \"$GH_LOG\" ] && [ -r \"$GH_LOG\" ]; then printf 'log_bytes %s\\n' \"$(wc -c < \"$GH_LOG\")\"; fi",
        # counted by the shell, not by `ls | wc -l`: a file name with a newline in it is still one output
        'if [ -n "$GH_OUT" ] && [ -d "$GH_OUT" ]; then _n=0; for _f in "$GH_OUT"/*; do '
        'if [ -e "$_f" ] || [ -L "$_f" ]; then _n=$((_n + 1)); fi; done; printf \'outputs %s\\n\' "$_n"; fi',
    ), settings=(("GH_CKPT", targets.checkpoint_path), ("GH_OUT", targets.output_dir)))


#: How the interpreter section finds the interpreter the service runs under. A venv's bin/python is a symlink to the
#: base interpreter, so /proc/<pid>/exe names the base one, which does not see the venv's packages: the process's
#: argv[0] (resolved against its cwd, or its own PATH for a bare name) comes first, exe second, python3 last.
_FIND_INTERPRETER: Final[tuple[str, ...]] = (
    'GH_PY_BY=""; GH_TORCH_PID=""',
    'if [ -n "$GH_PY" ]; then GH_PY_BY=deployment; fi',
    "for _pid in $GH_SVC_PIDS; do",
    '  if [ -n "$GH_PY" ]; then break; fi',
    "  _a0=$(tr '\\000' '\\n' < \"/proc/$_pid/cmdline\" 2>/dev/null | head -n 1)",
    '  case "$_a0" in',
    '    /*) ;;',
    '    */*) _a0="$(readlink "/proc/$_pid/cwd" 2>/dev/null)/$_a0" ;;',
    "    ?*) _path=$(tr '\\000' '\\n' < \"/proc/$_pid/environ\" 2>/dev/null | sed -n 's/^PATH=//p' | head -n 1)",
    '        _found=""; _ifs=$IFS; IFS=:',
    '        for _d in $_path; do if [ -z "$_found" ] && [ -x "$_d/$_a0" ]; then _found="$_d/$_a0"; fi; done',
    '        IFS=$_ifs; _a0=$_found ;;',
    "  esac",
    '  case "${_a0##*/}" in python*) if [ -x "$_a0" ]; then GH_PY=$_a0; GH_PY_BY=service_argv0; fi ;; esac',
    '  if [ -z "$GH_PY" ]; then _exe=$(readlink "/proc/$_pid/exe" 2>/dev/null)',
    '    case "${_exe##*/}" in python*) GH_PY=$_exe; GH_PY_BY=service_exe ;; esac; fi',
    '  if [ -n "$GH_PY" ]; then GH_TORCH_PID=$_pid; fi',
    "done",
    'if [ -z "$GH_PY" ] && command -v python3 >/dev/null 2>&1; then GH_PY=$(command -v python3); GH_PY_BY=python3; fi',
    # whether the service has torch's libraries mapped (the service imports torch), where /proc tells
    "_svc=${GH_TORCH_PID:-$(printf '%s\\n' $GH_SVC_PIDS | head -n 1)}",
    'GH_SVC_TORCH=unknown',
    'if [ -n "$_svc" ] && [ -r "/proc/$_svc/maps" ]; then',
    '  if grep -q torch "/proc/$_svc/maps" 2>/dev/null; then GH_SVC_TORCH=loaded; else GH_SVC_TORCH=not_loaded; fi',
    "fi",
)


def _interpreter(targets: ProbeTargets) -> ProbeSection:
    """The interpreter the smoke test runs: its path is the whole section (a host's path may hold a newline)."""
    return ProbeSection("interpreter", (*_FIND_INTERPRETER, "printf '%s' \"$GH_PY\""),
                        settings=(("GH_PY", targets.runtime_python),))


def _torch(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("torch", (
        "printf 'interpreter_by %s\\nservice_torch %s\\n' \"${GH_PY_BY:-none}\" \"$GH_SVC_TORCH\"",
        'if [ -z "$GH_PY" ]; then echo "no_python"; echo "smoke_rc 127"',
        'elif [ ! -x "$GH_PY" ]; then echo "not_executable"; echo "smoke_rc 126"',
        'else _smoke=$($TOT "$GH_PY" -c "$GH_SMOKE" 2>&1 </dev/null); _src=$?',
        "  printf '%s\\n' \"$_smoke\" | tail -n 1; printf 'smoke_rc %s\\n' \"$_src\"; fi",
    ), settings=(("GH_SMOKE", TORCH_SMOKE),))


def _guard(targets: ProbeTargets) -> ProbeSection:
    return ProbeSection("guard", GUARD_LINES, settings=(("GH_WS", targets.workspace),))


#: The probe's sections, in the order they run.
SECTIONS: Final[tuple[SectionBuilder, ...]] = (_gpus, _header, _apps, _disk, _process, _ports, _log, _progress,
                                               _interpreter, _torch, _topology, _nvlink, _guard)
#: Their names: the frames a finished probe of SECTIONS holds.
SECTION_NAMES: Final = tuple(section(ProbeTargets()).name for section in SECTIONS)
#: The probe version that added a section (a transcript of an older probe holds none of it; those not named
#: here: v5 or earlier).
SECTION_SINCE: Final = {"topology": 6, "nvlink": 6, "guard": 7}


def section_names(version: int) -> tuple[str, ...]:
    """The sections a finished probe of `version` holds (for reading its transcript)."""
    return tuple(name for name in SECTION_NAMES if SECTION_SINCE.get(name, 0) <= version)


@final
@dataclass(frozen=True, slots=True)
class ProbeScript:
    """One probe run's script, the nonce its output is framed under, and the sections it runs."""

    text: str
    nonce: str
    sections: tuple[str, ...]


def build_script(targets: ProbeTargets, sections: Sequence[SectionBuilder] = SECTIONS, *,
                 nonce: str | None = None) -> ProbeScript:
    """The probe script under a fresh nonce (or `nonce`): the settings as quoted shell variables, the framing's
    shell, then each section in its frame."""
    nonce = nonce or framing.new_nonce()
    built = [section(targets) for section in sections]
    settings: dict[str, object] = {"GH_T": targets.nvidia_smi_timeout_s, "GH_TT": targets.torch_timeout_s,
                                   "GH_NONCE": nonce, "GH_CAP": framing.SECTION_CAP_BYTES}
    for section in built:
        settings.update(section.settings)
    script = ShellScript(header=("#!/bin/sh", f"# gpuharness probe v{PROBE_VERSION}: one exec, framed sections",
                                 "LC_ALL=C; export LC_ALL"))
    for name, value in settings.items():
        if name in PATHS and value:
            script.let_path(name, value)
        else:
            script.let(name, value)
    script.code(
        "export GH_PAT",
        *framing.SHELL,
        # `timeout` may be missing on minimal images; then run without the cut-off (recorded as such).
        'if command -v timeout >/dev/null 2>&1; then TO="timeout -k 2 $GH_T"; TOT="timeout -k 2 $GH_TT"; '
        'else TO=""; TOT=""; fi',
    )
    for section in built:
        script.code(*framing.section_lines(section.name, section.lines, section.rc))
    script.code(framing.DONE_LINE)
    return ProbeScript(script.text(), nonce, tuple(section.name for section in built))
