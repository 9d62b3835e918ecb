"""Claims: which live process is working on a deployment right now (launching it, retrieving from it, running
jobs on it). A claim is an flock on `<registry>/locks/<work>-<deployment>.<registry tag>.lock` holding the worker's
pid; the kernel releases it when the process dies, so a free claim on work the registry calls under way means its
worker died (kill -9) and the work can be resumed.

A claim cannot be stolen or shared by mistake:
- the flocked descriptor must be the file at the path (same device and inode): a file unlinked or replaced between
  the open and the flock is opened again (`lock_file`), and the holder checks again before the work it guards
  (`Claim.check`: a launch, before its call goes out), so a claim file removed or replaced under its holder is
  refused there, never silently shared with whoever took the new file;
- the file's name carries the registry's identity (`registry_tag`: a digest of its resolved directory), so two
  registries whose claims share a directory never see each other's claims;
- a process marks what it starts with its pid and start time (`process_mark`); `alive` tells whether that very
  process still runs (a reused pid is another process), which is how work recorded elsewhere (the journal's launch
  events) is known to be under way when its claim file was taken from it.

The same open-flock-verify rule holds the registry's whole-file locks (`core.statefile.exclusive_lock`)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
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
#: how often a lock file swapped between its open and its flock is opened again before that is an error
_REOPENS = 5


def registry_tag(root: Path) -> str:
    """The registry's identity in its claims' names: a digest of its resolved directory (the same registry reached
    by any path gives the same tag; another registry, another)."""
    resolved = os.fsencode(Path(root).resolve())
    return hashlib.sha256(resolved).hexdigest()[:12]


def claim_path(root: Path, work: Work, deployment_id: str) -> Path:
    """The lock file of one kind of work on one deployment of this registry (an id outside the schema's pattern is
    refused)."""
    if not _ID.fullmatch(deployment_id):
        found = json_text.unwritable(deployment_id)
        why = found[1] if found else "is not [A-Za-z0-9_.-]+"
        raise UserError(f"deployment id {deployment_id!r}: {why}", place="deployment id",
                        hint="pick an id of letters, digits, '_', '.' and '-'")
    return root / LOCKS_DIR / f"{work}-{deployment_id}.{registry_tag(root)}.lock"


def is_at(fd: int, path: Path) -> bool:
    """Whether the open file fd is still the file at path (not removed, not replaced)."""
    held = os.fstat(fd)
    try:
        there = os.lstat(path)
    except FileNotFoundError:
        return False
    return (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)


def lock_file(path: Path, *, wait: bool, doing: str) -> int | None:
    """An exclusive flock on the regular file at path (created if missing; a link, FIFO, device or directory there
    is refused), verified to be the file at the path once locked: the descriptor, or None when another process
    holds it and `wait` is False (a prober holding it for microseconds is waited out first)."""
    for _ in range(_REOPENS):
        fd = regular_file.open_fd(path, os.O_RDWR | os.O_CREAT, follow=False, doing=doing)
        if not _flock(fd, wait):
            os.close(fd)
            return None
        if is_at(fd, path):
            return fd
        os.close(fd)  # unlinked or replaced between the open and the flock: lock the file there now
    raise UserError(f"{doing}: the file keeps being removed or replaced", path=path,
                    hint="something else deletes files in the registry; stop it; nothing was changed")


def _flock(fd: int, wait: bool) -> bool:
    if wait:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return True
    for attempt in range(_TRIES):
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            if attempt < _TRIES - 1:
                time.sleep(_PROBE_S)  # a prober (holder()) holds it for microseconds: look again before saying busy
    return False


@final
class Claim:
    """A held claim; release() (or the process's death) frees it."""

    __slots__ = ("_fd", "path")

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def held(self) -> bool:
        """Whether this claim still holds its work: its descriptor is still the file at its path."""
        return self._fd is not None and is_at(self._fd, self.path)

    def check(self, what: str) -> None:
        """Refuse (one line) to go on with `what` when the claim's file was removed or replaced under it: another
        process may have taken the work since."""
        if not self.held():
            raise UserError(f"the claim file was removed or replaced while this process held it; another process may "
                            f"be doing the work now, so {what} is not done", path=self.path,
                            hint="nothing was done; run `gpuharness status --refresh`, then the same command again")

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
    fd = lock_file(path, wait=False, doing="cannot open the claim file")
    if fd is None:
        return None
    os.ftruncate(fd, 0)
    os.write(fd, str(os.getpid()).encode())
    return Claim(path, fd)


def process_mark(pid: int | None = None) -> str:
    """This process (or pid) as `pid@start`: its start time since boot makes a reused pid another mark."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}@{_start(pid) or 0}"


def alive(mark: str) -> bool:
    """Whether the process a mark names still runs (not a zombie; a reused pid is not it)."""
    pid_text, _, start_text = mark.partition("@")
    if not pid_text.isdigit() or not start_text.isdigit():
        return False
    start = _start(int(pid_text))
    return start is not None and (start_text == "0" or start == int(start_text))


def _start(pid: int) -> int | None:
    """A live process's start time in clock ticks since boot (/proc), None when it is gone or a zombie; 0 where
    /proc cannot tell (then only the pid is known)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:  # a kernel file, not a file of the registry
            fields = handle.read().rpartition(b")")[2].split()
    except FileNotFoundError:
        return None
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):
        return None
    return int(fields[19])


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
