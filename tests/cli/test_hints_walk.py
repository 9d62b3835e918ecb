"""Hints lead forward. On a real `gpuharness sim serve` (as the README's by-hand block runs it), a deployment is put
in every state of core.lifecycle; the commands a user runs there (`status`, `run`, the live health run) print their
hints, and each hint's command is followed as printed. No hint names the command that printed it, none says to
edit a state file by hand, and following the first one moves the deployment on. A deployment that never came up
is resumed (`provision --resume ID`, without counting itself against max_concurrent_deployments) or destroyed; one
left in `error` by a bad input is back to `ready` after the same health run.

One deployment walks every state: the states a command only passes through (installing, running, retrieving,
destroying) are entered as a `kill -9` mid-command leaves them, by the lifecycle's own journaled transition."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from gpuharness.core.lifecycle import STATES, transition
from gpuharness.core.registry import Registry

pytestmark = pytest.mark.slow

STACK = ("--runtime", "comfyui", "--model", "sim-h3-mini", "--workflow", "sim-text-to-image")
INPUTS = '{"text": "a cat"}'
#: a hint that sends the user into a state file
HAND_EDIT = re.compile(r"(\bby hand\b|\b(set|edit|change|record|add)\b[^.;`]*\bin [\w.]*\.json\b|edit [\w./]*\.json)",
                       re.IGNORECASE)
#: a command inside a hint: `gpuharness ...` or `pytest checks/health ...`
COMMAND = re.compile(r"`((?:gpuharness|pytest checks/health) [^`]+)`")
#: One deployment's walk: each state, how it is entered (None: by the step before; else the journaled transition a
#: `kill -9` mid-command, or the provider, leaves) and whether the first hint `run` prints there is then followed.
WALK = (("provisioning", None, False), ("installing", "install killed mid-way", True), ("configuring", None, True),
        ("health-checking", None, True), ("ready", None, False),
        ("running", "run killed before its job's first line", True), ("retrieving", "retrieve killed mid-way", True),
        ("stopped", "stopped at its provider, then started again there", True),
        ("error", "job J-000001 failed: cause: bad_input: no input 'prompt' (before inputs were checked)", True),
        ("destroying", "destroy killed mid-way", True), ("destroyed", None, False))


class World:
    """An empty directory with a registry and a detached simulator, driven only through the command line."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("GPUHARNESS_")}
        self.env["GPUHARNESS_SIM_KEY"] = "any-twenty-characters-here"
        self.registry = Registry(root / ".pi" / "gpu")
        self.url = ""

    def cli(self, *args: str, timeout: float = 180) -> tuple[int, str]:
        done = subprocess.run([sys.executable, "-m", "gpuharness", *args], cwd=self.root, env=self.env,
                              capture_output=True, text=True, timeout=timeout)
        return done.returncode, done.stdout + done.stderr

    def command(self, text: str) -> tuple[int, str]:
        """A hint's command as printed (placeholders filled in); the checkout's health run is `gpuharness check`."""
        text = text.replace("--inputs JSON", f"--inputs '{INPUTS}'").replace("SECONDS", "60")
        argv = shlex.split(text)
        if argv[:2] == ["pytest", "checks/health"]:
            argv = ["gpuharness", "check", "health", *argv[2:]]
        assert argv[0] == "gpuharness", text
        return self.cli(*argv[1:])

    def ready_delay(self, seconds: float) -> None:
        httpx.post(f"{self.url}/_sim/config", json={"ready_delay_s": seconds}, timeout=10).raise_for_status()

    def provision(self, dep_id: str, *extra: str) -> tuple[int, str]:
        return self.cli("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfy:1", *STACK,
                        "--idle-minutes", "15", "--id", dep_id, *extra)

    def status(self, dep_id: str) -> str:
        return self.registry.deployment(dep_id).status


def ok(result: tuple[int, str]) -> str:
    assert result[0] == 0, result[1][-3000:]
    return result[1]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    made = World(tmp_path_factory.mktemp("walk"))
    ok(made.cli("init"))
    served = ok(made.cli("sim", "serve", "--port", "0", "--configure", "--detach"))
    made.url = re.search(r"ready (http://127\.0\.0\.1:\d+)", served).group(1)
    with made.registry.update("policy.json") as policy:
        policy["max_concurrent_deployments"] = 20
    try:
        yield made
    finally:
        made.cli("sim", "stop")


def _hints(text: str) -> list[str]:
    return list(dict.fromkeys(COMMAND.findall(text)))


def _printed(world: World, dep_id: str) -> dict[str, str]:
    """What each command a user runs on the deployment prints (its hints among it), by the command."""
    health = f"pytest checks/health --gpu-mode live --deployment {dep_id}"
    status = world.cli("status")[1]
    return {"gpuharness status": "\n".join(line for line in status.splitlines() if dep_id in line),
            f"gpuharness run {dep_id}": world.cli("run", dep_id, "--inputs", INPUTS)[1],
            health: "\n".join(line for line in world.command(health)[1].splitlines() if f"{dep_id}:" in line)}


def _same(hint: str, printer: str) -> bool:
    """Whether a hint names the command that printed it (the same subcommand on the same deployment)."""
    return shlex.split(hint.replace("--inputs JSON", ""))[:3] == shlex.split(printer)[:3]


def test_every_hint_leads_forward(world: World) -> None:
    dep_id = "dep_walk"
    ok(world.provision(dep_id))
    for state, enter, follow in WALK:
        if enter is not None:
            transition(world.registry, dep_id, state, note=enter, **({"error": enter} if state == "error" else {}))
        assert world.status(dep_id) == state, f"the walk did not reach {state}"
        printed = _printed(world, dep_id)  # status, run, then the health run: each may move it on by itself
        for printer, text in printed.items():
            print(f"--- {state}: {printer}\n{text}")  # the walk, for the log
            assert not HAND_EDIT.search(text), f"{printer} in {state} sends the user into a state file: {text}"
            back = [hint for hint in _hints(text) if _same(hint, printer)]
            assert back == [], f"{printer} in {state} points back at itself: {back}"
        run = printed[f"gpuharness run {dep_id}"]
        if state == "error":  # left in error by a bad input: the run's hint is the same health run, which passed
            assert f"pytest checks/health --gpu-mode live --deployment {dep_id}" in _hints(run), run
            assert world.status(dep_id) == "ready"
        if state == "destroyed":
            assert "kept as history" in run, run
        if not follow or world.status(dep_id) != state:  # run settled a dead run, or the health run passed it
            continue
        hints = _hints(run)
        assert hints, f"`run` on a {state} deployment names no way on: {printed}"
        code, out = world.command(hints[0])
        assert code == 0, f"following {hints[0]!r} from {state} failed: {out[-2000:]}"
        assert world.status(dep_id) != state, f"following {hints[0]!r} left {dep_id} {state}"
    walked = {state for state, _, _ in WALK}
    assert walked == set(STATES), f"states the walk missed: {set(STATES) - walked}"


def test_a_deployment_that_never_came_up_is_resumed_or_destroyed(world: World) -> None:
    world.ready_delay(12)
    try:
        code, out = world.provision("dep_never_up", "--up-deadline", "3")
    finally:
        world.ready_delay(0.2)
    assert code != 0 and "did not come up" in out
    assert world.status("dep_never_up") == "error"
    resume, destroy = "gpuharness provision --resume dep_never_up", "gpuharness destroy dep_never_up --confirm " \
                                                                   "dep_never_up"
    for printer, text in _printed(world, "dep_never_up").items():
        assert resume in text and destroy in text, f"{printer}: {text}"
        assert not HAND_EDIT.search(text), text
    assert resume in out and destroy in out
    live = sum(d.is_live for d in world.registry.deployments())
    with world.registry.update("policy.json") as policy:  # at the ceiling, counting itself
        policy["max_concurrent_deployments"] = live
    try:
        code, again = world.provision("dep_never_up")
        assert code == 2 and "max_concurrent_deployments" not in again and resume in again, again
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # it comes up 12 s after its launch
            code, out = world.command(resume + " --up-deadline 30")
            if code == 0:
                break
        assert code == 0, out
    finally:
        with world.registry.update("policy.json") as policy:
            policy["max_concurrent_deployments"] = 20
    assert "resumed dep_never_up (provisioning)" in out
    record = world.registry.deployment("dep_never_up")
    assert record.ssh_route is not None and record.endpoint
    ok(world.cli("install", "dep_never_up"))
    ok(world.cli("configure", "dep_never_up"))
    ok(world.command("pytest checks/health --gpu-mode live --deployment dep_never_up"))
    assert world.status("dep_never_up") == "ready"
    instances = json.loads(ok(world.cli("status", "--json")))["deployments"]
    assert [d["instance_id"] for d in instances if d["id"] == "dep_never_up"] == [record.instance_id], \
        "resumed, not launched again"
