"""The crash matrix: `kill -9` of a real `gpuharness` process at each step of provision, destroy, retrieve and plan
apply, held at that step by the simulator's faults (a stalled list, a committed launch or terminate whose answer
is held, a host that never answers a read, an instance that never comes up).

After each kill, `status --refresh` must report every billing instance (none unreported). After the recovery the
command's own message names, the refresh is clean, no key has two instances, no deployment is stuck mid-step, and
the audit passes. `pytest tests/project/test_crash_matrix.py -s` prints one `CRASH|` row per cell; bench/crash_matrix.py
makes the README's table.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from lifecycle_fakes import provision_comfyui, ready_with_output

from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.retrieve import PARTIAL, partial_name

DEP = "dep_crash_01"
PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr", "0.40",
             "--idle-minutes", "15", "--id", DEP, "--up-deadline", "60")
LIST, LAUNCH, BY_ID = "/api/v1/instances/", "/asks/", "/api/v0/instances/{id}/"


@dataclass
class Cell:
    """One kill: the command, the fault that holds it at its step, when it is there, and the recovery."""

    name: str
    step: str
    setup: Callable[[SimulatedEstate, Path], list[str]]  # -> the command to kill
    arm: Callable[[SimulatedEstate], None]
    there: Callable[[SimulatedEstate, Path], bool]
    recover: Callable[[SimulatedEstate, Path, str], list[str]]  # (lab, work dir, refresh text) -> a command
    after_kill: list[str] = field(default_factory=list)


def cli(lab: SimulatedEstate, *args: str) -> subprocess.CompletedProcess[str]:
    return lab.cli(*args, "--registry", str(lab.registry.root), timeout_s=180)


def billing(lab: SimulatedEstate) -> set[str]:
    return {i.id for i in lab.sim.state.instances.values() if i.status != "terminated"}


# --- set-ups --------------------------------------------------------------------------------------------------
def fresh(lab: SimulatedEstate, work: Path) -> list[str]:
    return list(PROVISION)


def provisioned(lab: SimulatedEstate, work: Path) -> list[str]:
    provision_comfyui(lab, DEP)
    return ["destroy", DEP, "--confirm", DEP]


def with_output(lab: SimulatedEstate, work: Path) -> list[str]:
    ready_with_output(lab, DEP)
    return ["retrieve", DEP, "--to", str(work / "outputs")]


def planned_launch(lab: SimulatedEstate, work: Path) -> list[str]:
    made = cli(lab, "plan", "make", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1",
               "--cost-hr", "0.40", "--idle-minutes", "15", "-o", str(work / "plan.json"))
    assert made.returncode == 0, made.stderr
    return ["plan", "apply", str(work / "plan.json"), "--yes", "--artifacts", str(work / "artifacts")]


def planned_teardown(lab: SimulatedEstate, work: Path) -> list[str]:
    provision_comfyui(lab, DEP)
    made = cli(lab, "plan", "make", "--terminate", DEP, "-o", str(work / "plan.json"))
    assert made.returncode == 0, made.stderr
    return ["plan", "apply", str(work / "plan.json"), "--yes", "--artifacts", str(work / "artifacts")]


# --- where the kill lands ------------------------------------------------------------------------------------
def fault(**armed: object) -> Callable[[SimulatedEstate], None]:
    return lambda lab: lab.sim.inject(provider="vast", count=1, **armed)


def never_up(lab: SimulatedEstate) -> None:
    lab.sim.state.ready_delay_s = 3600.0


def sftp_stalls(lab: SimulatedEstate) -> None:
    host = lab.host_of(DEP)
    host.reconfigure(replace(host.spec, sftp_stall_s=600.0))


def fired(name: str) -> Callable[[SimulatedEstate, Path], bool]:
    return lambda lab, work: lab.sim.faults.fired.get(name, 0) >= 1


def launched(lab: SimulatedEstate, work: Path) -> bool:
    return lab.sim.stats()["launches"] >= 1


def instance_recorded(lab: SimulatedEstate, work: Path) -> bool:
    return any(d.instance_id for d in lab.registry.deployments())


def terminated(lab: SimulatedEstate, work: Path) -> bool:
    return any(i.status == "terminated" for i in lab.sim.state.instances.values())


def transferring(lab: SimulatedEstate, work: Path) -> bool:
    return (work / "outputs" / PARTIAL / partial_name("J-000001", ("out.png",))).exists()


# --- recoveries: what the messages name --------------------------------------------------------------------
def again(command: list[str]) -> Callable[[SimulatedEstate, Path, str], list[str]]:
    return lambda lab, work, refresh: list(command)


def come_up_then(command: list[str]) -> Callable[[SimulatedEstate, Path, str], list[str]]:
    def recover(lab: SimulatedEstate, work: Path, refresh: str) -> list[str]:
        lab.sim.state.ready_delay_s = 0.2
        for instance in lab.sim.state.instances.values():  # the instance that was slow to start is up now
            instance.ready_at_mono = time.monotonic()
        return list(command)
    return recover


def named_resume(lab: SimulatedEstate, work: Path, refresh: str) -> list[str]:
    """Remake the plan as a person would: refused, with the resume command to run instead."""
    remade = cli(lab, "plan", "make", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1",
                 "--cost-hr", "0.40", "--idle-minutes", "15", "-o", str(work / "plan2.json"))
    assert remade.returncode == 2 and "resume it with `" in remade.stderr, remade.stderr
    return shlex.split(remade.stderr.split("resume it with `", 1)[1].split("`", 1)[0])[1:]


def destroy_it(lab: SimulatedEstate, work: Path, refresh: str) -> list[str]:
    return ["destroy", DEP, "--confirm", DEP]


CELLS = [
    Cell("provision: recorded, pre-launch list stalled", "after the record, before the launch call", fresh,
         fault(fault="latency", latency_ms=60_000, route=LIST), fired("latency"), again(list(PROVISION))),
    Cell("provision: launch committed, answer held", "between the launch call and its record", fresh,
         fault(fault="hold_after_commit", latency_ms=60_000, route=LAUNCH), launched, again(list(PROVISION))),
    Cell("provision: launch committed, answer held; destroyed instead", "between the launch call and its record",
         fresh, fault(fault="hold_after_commit", latency_ms=60_000, route=LAUNCH), launched, destroy_it),
    Cell("provision: instance recorded, never comes up", "waiting until running", fresh, never_up,
         instance_recorded, come_up_then(list(PROVISION))),
    Cell("destroy: terminate call stalled", "after destroying, before the terminate commits", provisioned,
         fault(fault="latency", latency_ms=60_000, route=BY_ID), fired("latency"), destroy_it),
    Cell("destroy: terminate committed, answer held", "between the terminate and its record", provisioned,
         fault(fault="hold_after_commit", latency_ms=60_000, route=BY_ID), terminated, destroy_it),
    Cell("retrieve: SFTP read never answers", "mid-transfer", with_output, sftp_stalls, transferring,
         lambda lab, work, refresh: (sftp_stalls_off(lab), ["retrieve", DEP, "--to", str(work / "outputs")])[1]),
    Cell("plan apply: launch committed, answer held", "between the plan's launch and its record", planned_launch,
         fault(fault="hold_after_commit", latency_ms=60_000, route=LAUNCH), launched, named_resume),
    Cell("plan apply: terminate committed, answer held", "between the plan's terminate and its record",
         planned_teardown, fault(fault="hold_after_commit", latency_ms=60_000, route=BY_ID), terminated,
         destroy_it),
]


def sftp_stalls_off(lab: SimulatedEstate) -> None:
    host = lab.host_of(DEP)
    host.reconfigure(replace(host.spec, sftp_stall_s=0.0))


def kill_at_step(lab: SimulatedEstate, work: Path, cell: Cell, command: list[str]) -> None:
    cell.arm(lab)
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", *command, "--registry", str(lab.registry.root)],
                               env=lab.env, cwd=lab.root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while not cell.there(lab, work):
        assert process.poll() is None, f"{cell.name}: the command ended before its step ({process.returncode})"
        assert time.monotonic() < deadline, f"{cell.name}: never reached its step"
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait(timeout=30) == -signal.SIGKILL
    lab.sim.faults.clear()


def reported(payload: dict, lab: SimulatedEstate) -> set[str]:
    """The instances the refresh accounts for: claimed by a live deployment, linked, or flagged."""
    claimed = {d.instance_id for d in lab.registry.deployments() if d.is_live and d.instance_id}
    flagged = {o["instance_id"] for o in payload["orphans"]} | {
        u["instance_id"] for u in payload["unresolved"] if u["instance_id"]}
    return claimed | flagged


def stuck(lab: SimulatedEstate) -> list[str]:
    return [f"{d.id} {d.status}" for d in lab.registry.deployments()
            if d.launch_unfinished or d.status in ("retrieving", "destroying")]


def recovery_words(command: list[str]) -> str:
    """The recovery as the table shows it: `gpuharness destroy DEP`, or the provision resumed by its request."""
    if command[0] == "provision":
        return f"gpuharness provision (the same request, --id {command[command.index('--id') + 1]})"
    return f"gpuharness {command[0]} {command[1]}"


def duplicates(lab: SimulatedEstate) -> int:
    keys = Counter(i.name for i in lab.sim.state.instances.values())
    return sum(n - 1 for n in keys.values() if n > 1)


@pytest.mark.slow
@pytest.mark.parametrize("cell", CELLS, ids=[c.name for c in CELLS])
def test_kill_9_at_each_step_leaves_nothing_billing_unreported_duplicated_or_stuck(tmp_path, cell):
    started = time.monotonic()
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        work = tmp_path / "work"
        work.mkdir()
        command = cell.setup(lab, work)
        kill_at_step(lab, work, cell, command)
        state = ", ".join(f"{d.id} {d.status}" + ("" if d.instance_id else " (no instance id)")
                          for d in lab.registry.deployments())
        refresh = cli(lab, "status", "--refresh", "--json")
        payload = json.loads(refresh.stdout)
        unreported = billing(lab) - reported(payload, lab)
        assert not unreported, f"billing and unreported after the kill: {unreported}\n{refresh.stdout}"
        assert not stuck(lab) or refresh.returncode == 1, f"stuck and called clean: {stuck(lab)}\n{refresh.stdout}"
        findings = [f"{k} {len(payload[k])}" for k in ("orphans", "vanished", "unresolved", "interrupted")
                    if payload[k]]
        linked = sum(1 for u in payload["unresolved"] if u["linked"])
        findings += [f"linked by key {linked}"] if linked else []
        findings += [t.split(" (")[0] for t in payload["transitions"]]
        recovery = cell.recover(lab, work, refresh.stdout)
        recovered = cli(lab, *recovery)
        assert recovered.returncode == 0, f"{recovery}: {recovered.stdout}{recovered.stderr}"
        final = cli(lab, "status", "--refresh")
        assert final.returncode == 0 and "clean" in final.stdout, final.stdout + final.stderr
        assert duplicates(lab) == 0 and stuck(lab) == []
        assert billing(lab) - reported(json.loads(cli(lab, "status", "--refresh", "--json").stdout), lab) == set()
        audit = lab.suite("audit", ["--gpu-mode", "live"])
        assert audit == 0, (lab.root / "audit.log").read_text()[-3000:]
        live = len(billing(lab))
        print(f"CRASH|{cell.name}|{cell.step}|{state}|exit {refresh.returncode}: {'; '.join(findings) or 'clean'}"
              f"|{recovery_words(recovery)}|0|{duplicates(lab)}|{len(stuck(lab))}|{live}|pass"
              f"|{time.monotonic() - started:.1f}")
