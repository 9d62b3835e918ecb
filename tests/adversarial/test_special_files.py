"""Special files, sizes and depth: a state file is read only when it is a regular file, under its size cap, and
parsed under a depth bound. A FIFO, a link to /dev/zero, a directory, a link to a FIFO, a socket, a file over its
cap or deeply nested JSON in a state file's place is one line naming the file and exit 2 (the audit: a finding
naming it), within seconds and within bounded memory, and no other file changes. The real command line runs in a
subprocess under an address-space limit smaller than the over-cap files."""

from __future__ import annotations

import contextlib
import functools
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from checkout import ROOT
from health_world import sdxl_graph
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuharness.core import claims
from gpuharness.core.registry import Registry

CLAIM = "claim file"
DOCUMENT_FILES = ("deployments.json", "policy.json", "providers.json", "machines.json", "workflows.json",
                  "models.json", "connections.json")
LINE_FILES = ("jobs.jsonl", "transitions.jsonl")
NEW_ID = "dep_new"
PROVISION = ("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "img", "--cost-hr", "0.4",
             "--idle-minutes", "5", "--id", NEW_ID)
COMMANDS: dict[str, tuple[str, ...]] = {
    "status": ("status",), "spend": ("spend",), "validate": ("validate",), "provision": PROVISION,
    "audit": ("check", "audit", "-q", "-p", "no:cacheprovider"),
}
#: the commands that read each file before they change anything (provision reaches the provider after these)
READERS: dict[str, tuple[str, ...]] = {
    "deployments.json": ("status", "validate", "provision", "audit"),
    "policy.json": ("spend", "validate", "provision", "audit"),
    "providers.json": ("validate", "provision", "audit"),
    "machines.json": ("validate", "audit"),
    "workflows.json": ("validate", "audit"),
    "models.json": ("validate", "audit"),
    "connections.json": ("validate", "audit"),
    "jobs.jsonl": ("spend", "validate", "provision", "audit"),
    "transitions.jsonl": ("validate", "audit"),
    CLAIM: ("provision",),
}
#: stand-ins that are not regular files, and what the one line must say
NOT_REGULAR = {"fifo": "FIFO", "dev_zero_link": "character device", "directory": "directory",
               "fifo_link": "FIFO", "socket": "socket"}
SIZED = {"over_cap": "cap", "deep_json": "nested"}
#: the address space a command may use; every over-cap stand-in is larger
MEMORY_LIMIT = 768 << 20
OVER_CAP = 1 << 30
TIMEOUT_S = 30


@functools.cache
def base_registry() -> Path:
    """A registry with a provider (at a closed port: a call to it fails loudly), a deployment, a job and a
    transition."""
    root = Path(tempfile.mkdtemp(prefix="gh-special-")) / "base"
    registry = Registry(root)
    registry.init()
    with registry.update("providers.json") as document:
        document["providers"].append({"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY",
                                      "api_base": "http://127.0.0.1:9"})
    with registry.update("deployments.json") as document:
        document["deployments"].append({
            "id": "dep_a", "provider": "vast", "instance_id": "inst-1", "gpu": "RTX 4090", "runtime": "comfyui",
            "status": "ready", "cost_hr": 0.7, "created_at": "2026-11-02T09:00:00Z",
            "shutdown_rule": {"idle_minutes": 15}, "owner": "ops", "reason": "tests"})
    registry.ledger_path.write_text(
        '{"id":"J-1","deployment_id":"dep_a","provider":"vast","status":"completed","ts":"2026-11-02T10:03:12Z",'
        '"started_at":"2026-11-02T10:00:00Z","completed_at":"2026-11-02T10:03:12Z","duration_s":192.0,'
        '"cost_usd":0.0373}\n')
    registry.journal_path.write_text(
        '{"ts":"2026-11-02T09:00:00Z","deployment":"dep_a","provider":"vast","from":null,"to":"provisioning"}\n')
    return root


def target(root: Path, file: str) -> Path:
    return claims.claim_path(root, "launch", NEW_ID) if file == CLAIM else root / file


@contextlib.contextmanager
def stand_in(path: Path, kind: str, file: str, depth: int) -> Iterator[None]:
    """Put the hostile kind of file at path (a listening socket is held open for the block); deep JSON nests
    `depth` arrays in an object (within the parsers' own limits or far beyond them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    held: socket.socket | None = None
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "fifo_link":
        os.mkfifo(path.with_name(path.name + ".pipe"))
        path.symlink_to(path.name + ".pipe")
    elif kind == "dev_zero_link":
        path.symlink_to("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "socket":
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(path))
        held.listen()
    elif kind == "over_cap":  # sparse: no disk, and no newline anywhere (one line, for a JSON Lines file)
        with open(path, "wb") as handle:
            handle.write(b"{" if file in LINE_FILES else b"[")
        os.truncate(path, OVER_CAP)
    elif kind == "deep_json":
        text = '{"x": ' + "[" * depth + "]" * depth + "}"
        path.write_text(text + "\n" if file in LINE_FILES else text)
    try:
        yield
    finally:
        if held is not None:
            held.close()


def snapshot(root: Path, skip: Path) -> dict[str, bytes | str]:
    """Every path under root with its bytes, but the stand-in and the locks (a command takes its lock or claim,
    an flock, before it reads the state that then refuses it)."""
    found: dict[str, bytes | str] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(directory) / name
            if path == skip or path.name.endswith(".pipe") or path.suffix == ".lock" or path.parent == skip:
                continue
            found[str(path)] = ("link" if path.is_symlink() else "dir" if path.is_dir()
                                else path.read_bytes())
    return found


def limited() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def gpuharness(root: Path, command: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "VAST_API_KEY": "x" * 24}
    try:
        return subprocess.run([sys.executable, "-m", "gpuharness", *COMMANDS[command], "--registry", str(root)],
                              capture_output=True, text=True, timeout=TIMEOUT_S, cwd=root.parent, env=env,
                              preexec_fn=limited)
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"gpuharness {command} hung past {TIMEOUT_S} s") from exc


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, str, int]:
    file = draw(st.sampled_from(sorted(READERS)))
    kinds = sorted(NOT_REGULAR) + ([] if file == CLAIM else sorted(SIZED))
    depth = draw(st.integers(min_value=100, max_value=1100) | st.just(100_000))
    return file, draw(st.sampled_from(kinds)), draw(st.sampled_from(READERS[file])), depth


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_special_file_in_a_state_files_place_is_one_line_naming_it_and_nothing_else_changes(case):
    file, kind, command, depth = case
    work = Path(tempfile.mkdtemp(prefix="gh-sp-"))
    try:
        root = work / "r"
        shutil.copytree(base_registry(), root, symlinks=True)
        path = target(root, file)
        with stand_in(path, kind, file, depth):
            before = snapshot(root, path)
            done = gpuharness(root, command)
            after = snapshot(root, path)
        said = NOT_REGULAR.get(kind) or SIZED[kind]
        output = done.stdout + done.stderr
        assert "Traceback" not in output and "RecursionError" not in output and "MemoryError" not in output, output
        if command == "audit":
            assert done.returncode == 1, output
            findings = [line for line in done.stdout.splitlines() if path.name in line and said in line]
            assert findings, f"no finding names {path.name} ({said}):\n{output[-3000:]}"
        else:
            errors = done.stderr.splitlines()
            assert done.returncode == 2, output
            assert len(errors) == 1 and errors[0].startswith("gpuharness: error: "), done.stderr
            assert str(path) in errors[0] and said in errors[0], errors[0]
        assert after == before, "a file other than the stand-in changed"
    finally:
        shutil.rmtree(work, ignore_errors=True)


GRAPH = {"4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sdxl.safetensors"}}}
CATALOG = ROOT / "src" / "gpuharness" / "sim" / "comfyui-0.8.0-object_info.json"
#: commands that read a file named on their command line ({} is the hostile file), and whether it is JSON
NAMED: dict[str, tuple[tuple[str, ...], bool]] = {
    "diagnose": (("diagnose", "{}"), False),
    "gpus --from": (("gpus", "--from", "{}"), False),
    "workflow check (graph)": (("workflow", "check", "{}", "--catalog", str(CATALOG)), True),
    "workflow check --catalog": (("workflow", "check", "{graph}", "--catalog", "{}"), True),
    "workflow add --from": (("workflow", "add", "--from", "{}", "--id", "wf_new"), True),
}


@st.composite
def named_cases(draw: st.DrawFn) -> tuple[str, str, int]:
    command = draw(st.sampled_from(sorted(NAMED)))
    kinds = sorted(NOT_REGULAR) + ["over_cap"] + (["deep_json"] if NAMED[command][1] else [])
    depth = draw(st.integers(min_value=100, max_value=1100) | st.just(100_000))
    return command, draw(st.sampled_from(kinds)), depth


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(named_cases())
def test_a_special_file_named_on_the_command_line_is_one_line_naming_it(case):
    """A log, nvidia-smi output, a graph or a node catalog named on the command line is read under the same rules
    (a pipe goes through `-`): one line and exit 2, but a log of any size, which `diagnose` streams (exit 0)."""
    command, kind, depth = case
    work = Path(tempfile.mkdtemp(prefix="gh-sp-"))
    try:
        root = work / "r"
        shutil.copytree(base_registry(), root, symlinks=True)
        graph = work / "graph.json"
        graph.write_text(json.dumps(GRAPH))
        path = work / "named"
        words, _ = NAMED[command]
        args = tuple(word.format(str(path), graph=str(graph)) for word in words)
        with stand_in(path, kind, "named", depth):
            before = snapshot(root, path)
            env = {**os.environ, "VAST_API_KEY": "x" * 24}
            try:
                done = subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(root)],
                                      capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work, env=env,
                                      preexec_fn=limited)
            except subprocess.TimeoutExpired as exc:
                raise AssertionError(f"gpuharness {command} hung past {TIMEOUT_S} s") from exc
            after = snapshot(root, path)
        output = done.stdout + done.stderr
        assert "Traceback" not in output and "RecursionError" not in output and "MemoryError" not in output, output
        if command == "diagnose" and kind == "over_cap":
            assert done.returncode == 0, output
        else:
            said = NOT_REGULAR.get(kind) or SIZED[kind]
            errors = done.stderr.splitlines()
            assert done.returncode == 2, output
            assert len(errors) == 1 and errors[0].startswith("gpuharness: error: "), done.stderr
            assert str(path) in errors[0] and said in errors[0], errors[0]
        assert after == before, "a registry file changed"
    finally:
        shutil.rmtree(work, ignore_errors=True)


@settings(max_examples=10, deadline=None)
@given(depth=st.integers(min_value=65, max_value=1100) | st.just(30_000),  # an argument holds at most 128 KiB
       command=st.sampled_from(["workflow add", "run"]))
def test_json_given_on_the_command_line_nests_under_the_same_bound(depth, command):
    """--inputs is JSON from outside too: nested past the bound it is one line and exit 2, nothing changed."""
    work = Path(tempfile.mkdtemp(prefix="gh-sp-"))
    try:
        root = work / "r"
        shutil.copytree(base_registry(), root, symlinks=True)
        graph = work / "graph.json"
        graph.write_text(json.dumps(sdxl_graph()))
        deep = '{"x": ' + "[" * depth + "]" * depth + "}"
        args = (("workflow", "add", "--from", str(graph), "--id", "wf_new", "--inputs", deep)
                if command == "workflow add" else ("run", "dep_a", "--inputs", deep))
        before = snapshot(root, work / "none")
        done = subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(root)],
                              capture_output=True, text=True, timeout=TIMEOUT_S, cwd=work, preexec_fn=limited)
        errors = done.stderr.splitlines()
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr[-2000:]
        assert len(errors) == 1 and "--inputs" in errors[0] and "nested" in errors[0], done.stderr[-2000:]
        assert snapshot(root, work / "none") == before
    finally:
        shutil.rmtree(work, ignore_errors=True)
