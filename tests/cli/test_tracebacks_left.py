"""The last tracebacks: a lone surrogate checked against a pattern, an unreadable transitions.jsonl, an unopenable
.lock file, and destroy in a read-only registry. Each is one line, exit 2, and nothing changed."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuharness.core import claims
from gpuharness.core.registry import Registry


def gpuharness(registry: Registry | Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    root = registry.root if isinstance(registry, Registry) else registry
    return subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(root)],
                          capture_output=True, text=True, timeout=60, cwd=cwd)


def one_line(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    """Exit 2 and one error line, the last on stderr (progress lines such as a disclosure may come before)."""
    assert done.returncode == 2, done.stdout + done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("gpuharness: error:")]
    assert "Traceback" not in done.stderr and len(errors) == 1, done.stderr
    assert done.stderr.splitlines()[-1] == errors[0]
    for fragment in fragments:
        assert fragment in errors[0], done.stderr


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every file and directory under root with its bytes, but locks/ and the claim files in it (core.claims: a command
    takes its deployment's claim, an flock holding its pid, before it reads the state that then refuses it)."""
    found: dict[str, bytes | None] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs:
            if Path(directory, name) != root / claims.LOCKS_DIR:
                found[os.path.join(directory, name)] = None
        for name in files:
            path = Path(directory) / name
            if path.parent == root / claims.LOCKS_DIR and path.is_file() and (
                    path.read_bytes().isdigit() or path.stat().st_size == 0):
                continue
            found[str(path)] = path.read_bytes() if path.is_file() and not path.is_symlink() else None
    return found


@pytest.fixture
def estate(registry: Registry) -> Registry:
    """The conftest registry, its provider pointing at a closed loopback port (a call to it would fail loudly)."""
    with registry.update("providers.json") as document:
        document["providers"][0]["api_base"] = "http://127.0.0.1:9"
    return registry


def test_a_lone_surrogate_in_a_state_file_is_one_line_with_its_place(estate):
    path = estate.path("deployments.json")
    path.write_text(path.read_text().replace('"id": "dep_a"', '"id": "dep_a\\ud800"'))
    before = snapshot(estate.root)
    for command in (("status",), ("validate",), ("reap",)):
        one_line(gpuharness(estate, *command), f"{path}:$.deployments[0].id", "lone surrogate")
    assert snapshot(estate.root) == before


def test_a_lone_surrogate_from_the_command_line_is_one_line(estate):
    """An argument that is not UTF-8 reaches Python as a lone surrogate; the id's pattern cannot take it."""
    before = snapshot(estate.root)
    done = subprocess.run([os.fsencode(sys.executable), b"-m", b"gpuharness", b"provision", b"--registry",
                           os.fsencode(estate.root), b"--provider", b"vast", b"--gpu", b"RTX 4090", b"--image", b"x",
                           b"--cost-hr", b"0.4", b"--idle-minutes", b"5", b"--id", b"dep\xed\xa0\x80"],
                          capture_output=True, timeout=60)
    one_line(subprocess.CompletedProcess(done.args, done.returncode, done.stdout.decode(),
                                         done.stderr.decode("utf-8", "replace")), "lone surrogate")
    assert snapshot(estate.root) == before


@contextlib.contextmanager
def unreadable(path: Path, how: str) -> Iterator[None]:
    path.unlink()
    if how == "a directory":
        path.mkdir()
    else:
        path.symlink_to(path.name)  # a symlink to itself: ELOOP
    yield


@pytest.mark.parametrize("how", ["a directory", "a symlink loop"])
def test_an_unreadable_journal_is_one_line_and_nothing_changes(estate, how):
    with unreadable(estate.journal_path, how):
        before = snapshot(estate.root)
        one_line(gpuharness(estate, "validate"), str(estate.journal_path), "cannot read")
        one_line(gpuharness(estate, "reap"), str(estate.journal_path))
        one_line(gpuharness(estate, "destroy", "dep_a", "--confirm", "dep_a"), str(estate.journal_path))
        assert snapshot(estate.root) == before


def test_an_unopenable_lock_file_is_one_line_and_nothing_changes(estate):
    lock = estate.path("deployments.json.lock")
    lock.unlink(missing_ok=True)
    lock.mkdir()
    before = snapshot(estate.root)
    one_line(gpuharness(estate, "destroy", "dep_a", "--confirm", "dep_a"), str(lock), "cannot open the lock file")
    assert snapshot(estate.root) == before
    run_lock = claims.claim_path(estate.root, "run", "dep_a")
    run_lock.mkdir(parents=True)
    before = snapshot(estate.root)
    one_line(gpuharness(estate, "run", "dep_a", "--inputs", "{}"), str(run_lock), "cannot open the claim file")
    assert snapshot(estate.root) == before


@contextlib.contextmanager
def read_only(root: Path) -> Iterator[None]:
    """chmod a-w for a user; root ignores modes, so there the immutable attribute (chattr +i) stands in."""
    paths = [root, *sorted(root.rglob("*"))]
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        try:
            yield
        finally:
            for p in reversed(paths):
                p.chmod(modes[p])
        return
    chattr = shutil.which("chattr")
    if chattr is None or subprocess.run([chattr, "+i", *map(str, paths)], capture_output=True).returncode != 0:
        subprocess.run([chattr or "true", "-i", *map(str, paths)], capture_output=True)
        pytest.skip("running as root where the immutable attribute is not available: no way to make a read-only "
                    "registry")
    try:
        yield
    finally:
        subprocess.run([chattr, "-i", *map(str, paths)], capture_output=True, check=True)


def test_destroy_in_a_read_only_registry_is_one_line_and_calls_no_provider(estate):
    with read_only(estate.root):
        before = snapshot(estate.root)
        done = gpuharness(estate, "destroy", "dep_a", "--confirm", "dep_a")
        one_line(done, str(estate.root))
        assert "127.0.0.1:9" not in done.stderr  # refused before any provider call
        assert snapshot(estate.root) == before
    assert json.loads(estate.path("deployments.json").read_text())["deployments"][0]["status"] == "ready"
