"""Claims: which live process is working on a deployment right now (launching it, retrieving from it, running
jobs on it). A claim is an flock on `<registry>/locks/<work>-<deployment>.lock` holding the worker's pid; the
kernel releases it when the process dies, so a free claim on work the registry calls under way means its worker
died (kill -9) and the work can be resumed."""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Literal, final

from gpuharness.core import json_text, regular_file
from gpuharness.core.errors import UserError

Work = Literal["launch", "retrieve", "run"]
LOCKS_DIR: Final = "locks"
#: the deployments.json id pattern: a claim's file name never leaves the locks directory
_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
_TRIES = 3
_PROBE_S = 0.01


def claim_path(root: Path, work: Work, deployment_id: str) -> Path:
    """The lock file of one kind of work on one deployment (an id outside the schema's pattern is refused)."""
    if not _ID.fullmatch(deployment_id):
        found = json_text.unwritable(deployment_id)
        why = found[1] if found else "is not [A-Za-z0-9_.-]+"
        raise UserError(f"deployment id {deployment_id!r}: {why}", place="deployment id",
                        hint="pick an id of letters, digits, '_', '.' and '-'")
    return root / LOCKS_DIR / f"{work}-{deployment_id}.lock"


@final
class Claim:
    """A held claim; release() (or the process's death) frees it."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None


def take(root: Path, work: Work, deployment_id: str) -> Claim | None:
    """Claim the work for this process, or None when another live process holds it (never blocks)."""
    path = claim_path(root, work, deployment_id)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot open the claim file: {exc.strerror}", path=path,
                        hint="check the registry directory's owner and mode; nothing was changed") from None
    # the harness makes claim files: a link, a FIFO, a device or a directory in one's place is refused
    fd = regular_file.open_fd(path, os.O_RDWR | os.O_CREAT, follow=False, doing="cannot open the claim file")
    for attempt in range(_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if attempt == _TRIES - 1:
                os.close(fd)
                return None
            time.sleep(_PROBE_S)  # a prober (holder()) holds it for microseconds: look again before saying busy
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return Claim(path, fd)


def holder(root: Path, work: Work, deployment_id: str) -> int | None:
    """The pid of the live process holding the claim (0 when it wrote none yet), or None when it is free."""
    path = claim_path(root, work, deployment_id)
    try:
        fd = regular_file.open_fd(path, follow=False, doing="cannot open the claim file")
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.read(fd, regular_file.CLAIM_PID).decode(errors="replace").strip()
            return int(text) if text.isdigit() else 0
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def is_free(root: Path, work: Work, deployment_id: str) -> bool:
    """No live process holds this claim."""
    return holder(root, work, deployment_id) is None


@contextlib.contextmanager
def claimed(root: Path, work: Work, deployment_id: str, *, busy: str, hint: str) -> Iterator[Claim]:
    """Hold the claim for the block; a claim held elsewhere is a one-line UserError (busy, with the pid)."""
    claim = take(root, work, deployment_id)
    if claim is None:
        pid = holder(root, work, deployment_id)
        raise UserError(f"{busy} (pid {pid})" if pid else busy, place=deployment_id, hint=hint)
    try:
        yield claim
    finally:
        claim.release()
