"""Claims on a deployment's work: held by one live process, named by its pid, freed by the kernel when that process
dies (real fork, real kill -9), and confined to the registry's locks directory."""

from __future__ import annotations

import multiprocessing
import os
import signal
from pathlib import Path

import pytest

from gpuharness.core import claims
from gpuharness.core.errors import UserError

FORK = multiprocessing.get_context("fork")


def hold(root: str, ready_fd: int) -> None:
    claim = claims.take(Path(root), "launch", "dep_a")
    assert claim is not None
    os.write(ready_fd, b"x")
    signal.pause()


def test_a_claim_is_held_by_one_live_process_and_freed_by_its_death(tmp_path):
    read_end, write_end = os.pipe()
    child = FORK.Process(target=hold, args=(str(tmp_path), write_end), daemon=True)
    child.start()
    os.read(read_end, 1)
    assert claims.holder(tmp_path, "launch", "dep_a") == child.pid
    assert claims.take(tmp_path, "launch", "dep_a") is None
    with pytest.raises(UserError, match=f"busy here \\(pid {child.pid}\\)"):
        with claims.claimed(tmp_path, "launch", "dep_a", busy="busy here", hint="wait"):
            pass
    assert claims.is_free(tmp_path, "retrieve", "dep_a")  # another kind of work is another claim
    os.kill(child.pid, signal.SIGKILL)
    child.join(timeout=30)
    assert claims.is_free(tmp_path, "launch", "dep_a")
    mine = claims.take(tmp_path, "launch", "dep_a")
    assert mine is not None and claims.holder(tmp_path, "launch", "dep_a") == os.getpid()
    mine.release()


@pytest.mark.parametrize("hostile", ["../x", "a/b", "", "dep a", "dep\nx"])
def test_a_claim_never_names_a_file_outside_the_locks_directory(tmp_path, hostile):
    with pytest.raises(UserError, match="is not"):
        claims.take(tmp_path, "launch", hostile)
    assert not (tmp_path / "x").exists() and not (tmp_path.parent / "x").exists()
