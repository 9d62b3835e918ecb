"""Plain JSON state files: parse with positions, atomic replace, and exclusive locks."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpuharness.core import json_text, regular_file, secrets
from gpuharness.core.claims import lock_file
from gpuharness.core.errors import UserError


def parse_json_text(text: str, path: Path | str) -> Any:
    """Parse JSON, reporting errors as file:line:column (core.json_text: finite numbers that fit a float)."""
    return json_text.loads(text, path)


def read_json(path: Path, *, cap: int = regular_file.STATE_DOCUMENT, what: str = "a state document") -> Any:
    """Read and parse a JSON file (a regular file under its cap: core.regular_file), with a clear error when it is
    missing, special, too big or broken."""
    try:
        raw = regular_file.read_bytes(path, cap, what=what)
    except FileNotFoundError:
        raise UserError("file not found", path=path,
                        hint="run `gpuharness init` or pass --registry DIR") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UserError(f"not UTF-8 (byte offset {exc.start})", path=path, place=f"{line}:{column}",
                        hint="save the file as UTF-8; nothing was changed") from None
    return parse_json_text(text, path)


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename in it survives a crash."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace path with data, redacted (core.secrets), atomically: temp file, fsync, os.replace, fsync dir; keeps
    the mode.

    A symlinked state file (dotfiles) stays a symlink: its target is the file replaced.
    """
    data = secrets.redact(data)
    if path.is_symlink():
        path = path.resolve()
    directory = path.parent
    directory.mkdir(parents=True, exist_ok=True)
    try:
        mode: int | None = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = None
    try:
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise UserError(f"cannot write: {exc.strerror}", path=path,
                        hint="check the directory's owner and mode; nothing was changed") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fchmod(handle.fileno(), mode if mode is not None else 0o644)
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    fsync_dir(directory)


STALE_TEMP_S = 60.0


def sweep_stale_temps(path: Path, *, older_than_s: float = STALE_TEMP_S, now: float | None = None) -> list[Path]:
    """Remove temp files of path left by writers killed mid-save (call it holding path's lock)."""
    moment = time.time() if now is None else now
    removed: list[Path] = []
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(FileNotFoundError):
            if moment - temp.stat().st_mtime > older_than_s:
                temp.unlink()
                removed.append(temp)
    return removed


def dump_json(document: Any) -> bytes:
    """Serialize a state document the way people read it: indented, sorted as given, newline at end."""
    return (json.dumps(document, indent=2, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def atomic_write_json(path: Path, document: Any) -> None:
    """Atomically replace a JSON file; a value JSON cannot carry (NaN, a lone surrogate) is refused first."""
    json_text.check_writable(document, path)
    atomic_write_bytes(path, dump_json(document))


@contextlib.contextmanager
def exclusive_lock(path: Path) -> Iterator[None]:
    """Hold an exclusive flock on a sidecar `<path>.lock` (left in place, like filelock), verified to be the file at
    its path once locked (core.claims.lock_file: a lock file removed or replaced between its open and its flock is
    locked again, so two writers never hold two different files)."""
    lock_path = path.with_name(path.name + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only registry
        raise UserError(f"cannot open the lock file: {exc.strerror}", path=lock_path,
                        hint="check the registry's owner and mode; nothing was changed") from None
    # a directory, a FIFO or a link in the lock's place is refused (core.regular_file)
    fd = lock_file(lock_path, wait=True, doing="cannot open the lock file")
    assert fd is not None  # a waiting lock is always taken
    try:
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
