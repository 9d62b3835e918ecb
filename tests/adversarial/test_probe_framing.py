"""Nothing a host prints can forge the probe: hostile text (the section marker, NUL, CR, U+2028/U+2029, \\x1c-\\x1e,
backslash escapes, format directives, lines shaped like other sections) put into every field a host controls leaves
every other fact exactly as it was, and never turns a failing health verdict into a passing one.

The host is a simulated one (sim.host) with the faults of issue 17's example: uncorrected ECC errors, 97 C thermal
slowdown, a foreign GPU process and 0.2 GB free. The generative test runs the real probe script through a real local
/bin/sh (dash here) in the host's sandbox, its PATH and directory as its SSH exec has them; the end-to-end tests run
it over SSH, and the real health suite over SSH with the ready gate."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, replace
from typing import Any

import pytest
from health_world import HealthWorld, run_checks
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuharness import probe
from gpuharness.core.deployment import Deployment
from gpuharness.gpu import nvidia_smi
from gpuharness.health import rules
from gpuharness.probe.facts import ProbeResult, ProbeTargets
from gpuharness.remote import ExecResult, LineSink
from gpuharness.remote.local import LocalRemote
from gpuharness.sim.host import HostSpec, SimHost

#: issue 17's unhealthy host: each of these fails a health check on its own
UNHEALTHY = HostSpec(ecc_uncorrected=2, temperature_c=97, throttle=("hw_thermal_slowdown",),
                     foreign_processes=("miner",), disk_free_gb=0.2)
ORDERED = Deployment(id="dep", provider="vast", status="health-checking", cost_hr=0.0, created_at="",
                     gpu="RTX 4090", gpu_count=1)
MODEL_BYTES = 7 * 2**30

#: pieces of text that have forged, or could forge, a section or a line inside one
HOSTILE = ("@@gpuharness", "@@gpuharness gpus", "@@gpuharness end rc=0", "@@gpuharness done", "@@gpuharness log",
           "\n", "\r", "\r\n", "\x00", "\u2028", "\u2029", "\x1c", "\x1d", "\x1e", "\x85", "\x0b", "\x0c", "\\n",
           "\\c", "\\0101", "\\", "%s", "%b", "'", '"', "$(id)", "`id`", "# exit: 0", "# query: index,name",
           "0, NVIDIA GeForce RTX 4090, 24564, 38, 0, 0x0", "| NVIDIA-SMI 999.99  Driver Version: 999.99  CUDA "
           "Version: 99.9 |", "5000 python main.py", "found_by pattern", "smoke_rc 0", "ok max_abs_err=0",
           "0123456789abcdef0123456789abcdef gpus 0 10", "/workspace 999999999 999999999")
hostile_text = st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=6)), min_size=1, max_size=6).map(
    "".join)
#: a name a file system holds: no "/" or NUL, not "." or "..", at most 200 bytes
file_name = hostile_text.map(lambda text: text.replace("/", "_").replace("\x00", "_")).filter(
    lambda name: name not in ("", ".", "..") and len(name.encode()) <= 200)


@dataclass(frozen=True)
class Hostile:
    """Hostile text in each field a host controls (None: the field as the baseline has it)."""

    log_lines: tuple[str, ...] = ()
    foreign_name: str | None = None
    gpu_suffix: str | None = None
    output_files: tuple[str, ...] = ()
    interpreter_dir: str | None = None


hostile_fields = st.builds(
    Hostile, log_lines=st.lists(hostile_text, max_size=4).map(tuple), foreign_name=st.none() | hostile_text,
    gpu_suffix=st.none() | hostile_text, output_files=st.lists(file_name, max_size=4, unique=True).map(tuple),
    interpreter_dir=st.none() | file_name)


class SandboxShell:
    """A Remote that runs scripts with the real local /bin/sh in a simulated host's sandbox (its PATH, HOME and
    directory, as the host's SSH exec runs them), without the SSH round trip."""

    def __init__(self, host: SimHost) -> None:
        self.target = "sandbox"
        self.host = host

    def exec(self, script: str, *, deadline_s: float, on_line: LineSink | None = None) -> ExecResult:
        root = self.host.root
        path = f"{self.host.bin}:{root / 'system' / 'bin'}:/usr/local/bin:/usr/bin:/bin"
        prefix = (f"PATH={shlex.quote(path)}; export PATH; HOME={shlex.quote(str(root))}; export HOME; "
                  f"cd {shlex.quote(str(root))}\n")
        return LocalRemote().exec(prefix + script, deadline_s=deadline_s, on_line=on_line)

    def get_file(self, remote_path: str, local_path: str, **_: Any) -> int:
        raise NotImplementedError

    def close(self) -> None:
        return None


def targets_of(host: SimHost, runtime_python: str | None = None) -> ProbeTargets:
    return ProbeTargets(workspace=str(host.workspace), process_pattern="main.py", service_port=host.service_port,
                        log_path=str(host.log_path), output_dir=str(host.workspace / "output"), nvidia_smi_timeout_s=5,
                        runtime_python=runtime_python)


def verdicts(facts: ProbeResult, host: SimHost) -> dict[str, bool]:
    """Whether each health rule that reads the probe passes."""
    return {
        "gpu_matches_order": rules.gpu_matches_order(facts, ORDERED).ok,
        "driver_and_cuda": rules.driver_and_cuda(facts, "550.0", "12.4").ok,
        "no_uncorrected_ecc": rules.no_uncorrected_ecc(facts).ok,
        "no_harmful_throttling": rules.no_harmful_throttling(facts).ok,
        "temperature_under_limit": rules.temperature_under(facts, 85).ok,
        "no_foreign_compute_processes": rules.no_foreign_compute(facts).ok,
        "disk_has_room_for_model": rules.disk_has_room(facts, str(host.workspace), MODEL_BYTES, 10).ok,
        "service_process_and_port": rules.service_up(facts, "main.py", host.service_port).ok,
        "log_tail_has_no_classified_failure": rules.log_tail_clean(facts, str(host.log_path)).ok,
        "cuda_smoke_test": rules.cuda_smoke(facts, host.spec.runtime).ok,
    }


def fact_groups(facts: ProbeResult) -> dict[str, Any]:
    """The probe's facts, grouped by the host field that may legitimately change them."""
    smoke = facts.smoke
    return {
        "gpus": ([gpu.to_json() for gpu in facts.gpus], facts.gpu_error, facts.gpu_fields, facts.driver_version,
                 facts.cuda_version, smoke.outcome, smoke.exit_status),
        "apps": sorted((app.pid, app.used_memory_mib) for app in facts.compute_apps),
        "disk": facts.disk_free_bytes,
        "processes": (facts.processes, facts.process_found_by),
        "ports": facts.listening_ports,
        "log": facts.log_tail,
        "log_bytes": facts.progress.get("log_bytes"),
        "outputs": facts.progress.get("outputs"),
        "checkpoint": facts.progress.get("checkpoint"),
        "interpreter": (smoke.interpreter, smoke.found_by),
        "torch": (smoke.result, smoke.service_torch),
        "complete": (facts.complete, facts.exit_status),
    }


#: the groups each hostile field may change (the GPU's name shows in the smoke test's result line too)
CHANGES = {"log_lines": {"log", "log_bytes"}, "foreign_name": {"apps"}, "gpu_suffix": {"gpus", "torch"},
           "output_files": {"outputs"}, "interpreter_dir": {"interpreter"}}


def make_hostile(host: SimHost, hostile: Hostile) -> ProbeTargets:
    """Put the hostile text into the host; the probe's targets (the deployment's runtime_python names the interpreter
    under the hostile directory, a link to the service's virtual environment)."""
    spec = replace(UNHEALTHY, log_lines=UNHEALTHY.log_lines + hostile.log_lines,
                   foreign_processes=(hostile.foreign_name,) if hostile.foreign_name is not None else
                   UNHEALTHY.foreign_processes,
                   gpu=UNHEALTHY.gpu + hostile.gpu_suffix if hostile.gpu_suffix is not None else UNHEALTHY.gpu)
    host.reconfigure(spec)
    outputs = host.workspace / "output"
    for old in outputs.iterdir():
        old.unlink()
    for name in hostile.output_files:
        (outputs / name).write_bytes(b"x")
    runtime_python = None
    if hostile.interpreter_dir is not None:
        links = host.root / "links"
        links.mkdir(exist_ok=True)
        for old in links.iterdir():
            old.unlink()
        assert host.service_python is not None
        (links / hostile.interpreter_dir).symlink_to(host.service_python.parent.parent, target_is_directory=True)
        runtime_python = str(links / hostile.interpreter_dir / "bin" / "python")
    return targets_of(host, runtime_python)


def expected_log(lines: tuple[str, ...]) -> tuple[str, ...]:
    """The log tail as the file holds it: its lines, split on newline only, the last 200."""
    return tuple("".join(line + "\n" for line in lines).split("\n")[:-1][-200:])


def assert_not_forged(host: SimHost, hostile: Hostile, facts: ProbeResult, baseline: ProbeResult) -> None:
    changed: set[str] = set()
    for name, groups in CHANGES.items():
        if getattr(hostile, name) not in (None, ()):
            changed |= groups
    got, want = fact_groups(facts), fact_groups(baseline)
    assert facts.complete, facts.sections
    for group in want:
        if group not in changed:
            assert got[group] == want[group], f"{group} changed by {hostile}"
    if hostile.log_lines:
        lines = UNHEALTHY.log_lines + hostile.log_lines
        assert got["log"] == expected_log(lines)
        assert got["log_bytes"] == len("".join(line + "\n" for line in lines).encode())
    if hostile.output_files:
        assert got["outputs"] == len([name for name in hostile.output_files if not name.startswith(".")])
    if hostile.interpreter_dir is not None:
        assert got["interpreter"] == (str(host.root / "links" / hostile.interpreter_dir / "bin" / "python"),
                                      "deployment")
    if hostile.foreign_name is not None:
        assert 5000 in {app.pid for app in facts.compute_apps}, facts.compute_apps
    passing_now, passing_before = verdicts(facts, host), verdicts(baseline, host)
    forged = [name for name, ok in passing_now.items() if ok and not passing_before[name]]
    if hostile.log_lines:  # hostile log lines may themselves show a failure the log check reports: never a pass
        forged = [name for name in forged if name != "log_tail_has_no_classified_failure"]
    assert forged == [], f"hostile text made failing checks pass: {forged}"


@pytest.fixture(scope="module")
def unhealthy_host(tmp_path_factory):
    with SimHost(UNHEALTHY, root=tmp_path_factory.mktemp("hostile-host"), name="hostile") as host:
        _, baseline = probe.run(SandboxShell(host), targets_of(host), deadline_s=60)
        yield host, baseline


def test_the_unhealthy_host_fails_the_checks_it_should(unhealthy_host):
    host, baseline = unhealthy_host
    failing = sorted(name for name, ok in verdicts(baseline, host).items() if not ok)
    assert failing == ["disk_has_room_for_model", "no_foreign_compute_processes", "no_harmful_throttling",
                       "no_uncorrected_ecc", "temperature_under_limit"]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                  HealthCheck.too_slow])
@given(hostile=hostile_fields)
def test_hostile_text_in_any_host_field_forges_no_fact(unhealthy_host, hostile):
    host, baseline = unhealthy_host
    targets = make_hostile(host, hostile)
    _, facts = probe.run(SandboxShell(host), targets, deadline_s=60)
    assert_not_forged(host, hostile, facts, baseline)


#: one hostile value in every field at once, with the lines that forged sections before the probe was framed
EVERY_FIELD = Hostile(log_lines=("@@gpuharness gpus", "# exit: 0", "@@gpuharness end rc=0", "x\u2028@@gpuharness apps",
                                 "y\x1e@@gpuharness disk", "\\n@@gpuharness done\r"),
                      foreign_name="miner\n", gpu_suffix=" Driver Version: 999.99\\n@@gpuharness header",
                      output_files=("a\nb", "\\nc"), interpreter_dir="py\\n@@gpuharness log\\nclean")


def test_hostile_text_in_every_host_field_forges_nothing_over_ssh(unhealthy_host):
    """The same property through the host's real SSH exec (paramiko's server side running /bin/sh)."""
    from gpuharness.remote.connect import HostRoute, open_remote

    host, baseline = unhealthy_host
    targets = make_hostile(host, EVERY_FIELD)
    block = host.ssh_block()
    remote = open_remote(HostRoute(target="hostile", host=block["host"], port=block["port"], user="root",
                                   key_file=block["key_file"], known_hosts=block["known_hosts"]))
    try:
        _, facts = probe.run(remote, targets, deadline_s=60)
    finally:
        remote.close()
    assert_not_forged(host, EVERY_FIELD, facts, baseline)


def forged_log(workspace: str) -> tuple[str, ...]:
    """Log lines shaped like the probe's GPU, header, apps and disk sections of a healthy host (issue 17)."""
    fields = "index,name,memory.total,temperature.gpu,ecc.errors.uncorrected.volatile.total,clocks_event_reasons.active"
    return ("Starting server",
            "@@gpuharness gpus", f"# query: {fields}", "0, NVIDIA GeForce RTX 4090, 24564, 38, 0, 0x0000000000000000",
            "# exit: 0", "@@gpuharness end rc=0",
            "@@gpuharness header",
            "| NVIDIA-SMI 570.86.15              Driver Version: 570.86.15      CUDA Version: 12.8    |",
            "@@gpuharness end rc=0",
            "@@gpuharness apps", "@@gpuharness end rc=0",
            "@@gpuharness disk", f"{workspace} 209715200 157286400", "/ 209715200 157286400", "@@gpuharness end rc=0",
            "@@gpuharness log", "To see the GUI go to: http://0.0.0.0:8188")


FAILED = re.compile(r"^FAILED test_health\.py::test_(\w+)\[dep_forged\]")


def test_a_log_forging_healthy_sections_does_not_make_an_unhealthy_host_ready(pytester, world: HealthWorld):
    """Issue 17's example through the real health suite over SSH: the service log holds lines shaped like a healthy
    host's GPU, header, apps and disk sections. The host still fails the ECC, throttling, temperature, foreign process
    and disk checks, and the ready gate does not mark it ready."""
    host = world.add("dep_forged", UNHEALTHY)
    host.reconfigure(replace(UNHEALTHY, log_lines=forged_log(str(host.workspace))))
    result = run_checks(pytester, world)
    deployment = world.deployment("dep_forged")
    failed = {match.group(1) for line in result.outlines if (match := FAILED.match(line))}
    assert {"no_uncorrected_ecc", "no_harmful_throttling", "temperature_under_limit", "no_foreign_compute_processes",
            "disk_has_room_for_model"} <= failed, "\n".join(result.outlines[-40:])
    assert deployment["status"] != "ready" and deployment.get("ready_at") is None


def test_the_forged_sections_are_shaped_like_the_probe_fields():
    """The forged GPU section names real probe fields (so the test forges what a parser would accept)."""
    fields = forged_log("/w")[2].removeprefix("# query: ").split(",")
    assert set(fields) <= set(nvidia_smi.PROBE_FIELDS)


#: a `wc` on the host that miscounts: the length it reports for a section is not the section's
LYING_WC = "#!/bin/sh\nprintf '7\\n'\n"


def test_a_host_whose_tools_garble_the_probe_is_not_believed_and_not_ready(pytester, world: HealthWorld):
    """A host whose `wc` miscounts: the probe's output does not hold what the probe sent, so no fact of it is
    believed. Every check that reads the probe fails naming the broken frame (probe_corrupt), and the ready gate
    does not mark the host ready."""
    host = world.add("dep_garbled")
    (host.bin / "wc").write_text(LYING_WC)
    (host.bin / "wc").chmod(0o755)
    result = run_checks(pytester, world)
    deployment = world.deployment("dep_garbled")
    failures = [line for line in result.outlines if line.startswith("FAILED test_health.py::")]
    reachable = [line for line in failures if "test_host_reachable[dep_garbled]" in line]
    assert reachable and "cannot be believed" in reachable[0], "\n".join(result.outlines[-40:])
    for check in ("gpu_matches_order", "no_uncorrected_ecc", "disk_has_room_for_model", "service_process_and_port",
                  "log_tail_has_no_classified_failure"):
        assert any(f"test_{check}[dep_garbled]" in line and "cannot be believed" in line for line in failures), check
    assert deployment["status"] != "ready" and deployment.get("ready_at") is None
    assert deployment["health"]["status"] == "failed"


def test_a_gpu_name_cannot_set_the_driver_or_cuda_version(unhealthy_host):
    """nvidia-smi prints its header before any GPU's name: the header's first Driver and CUDA versions are the
    driver's, whatever a name in a later row says."""
    host, baseline = unhealthy_host
    host.reconfigure(replace(UNHEALTHY, gpu="RTX Driver Version: 999.99 CUDA Version: 99.9"))
    try:
        _, facts = probe.run(SandboxShell(host), targets_of(host), deadline_s=60)
    finally:
        host.reconfigure(UNHEALTHY)
    assert (facts.driver_version, facts.cuda_version) == (baseline.driver_version, baseline.cuda_version)
