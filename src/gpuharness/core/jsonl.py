"""Append-only JSON Lines files: one locked os.write per record, torn tails quarantined."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from gpuharness.core import json_text, regular_file, secrets
from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError


def _complete_object(fragment: bytes) -> bool:
    try:
        return isinstance(orjson.loads(fragment), dict)
    except orjson.JSONDecodeError:
        return False


def _quarantine_torn_tail(fd: int, path: Path) -> list[str]:
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return []
    tail_start = size
    cut = -1
    chunk = b""
    while tail_start > 0 and cut < 0:
        tail_start = max(0, tail_start - 65536)
        chunk = os.pread(fd, size - tail_start, tail_start)
        cut = chunk.rfind(b"\n")
    start = tail_start + cut + 1
    fragment = chunk[cut + 1:]
    if _complete_object(fragment):
        # A whole record that only lacks its newline (a hand edit, not a crash: our writer emits the
        # newline in the same write). It is history: finish the line instead of quarantining it.
        os.write(fd, b"\n")
        return []
    quarantine = path.with_name(path.name + ".torn")
    try:
        kept = regular_file.open_fd(quarantine, os.O_WRONLY | os.O_APPEND | os.O_CREAT, follow=False,
                                    doing="cannot keep a torn line aside")
    except FileNotFoundError:  # the directory vanished under the append
        raise UserError("cannot keep a torn line aside: the directory is gone", path=quarantine) from None
    try:
        os.write(kept, secrets.redact(orjson.dumps({"offset": start, "fragment": fragment.decode("utf-8", "replace"),
                                     "quarantined_at": now_ts()}) + b"\n"))
    finally:
        os.close(kept)
    os.ftruncate(fd, start)
    return [f"{path}: byte {start}: a torn last line (a writer died mid-write) was moved to "
            f"{quarantine.name}; it had never been acknowledged"]


def append_record(path: Path, record: dict[str, Any],
                  precheck: Callable[[], str | None] | None = None) -> list[str]:
    """Append record as one line, redacted (core.secrets), with one os.write under an exclusive flock, then fsync.

    precheck runs under the lock; a returned message refuses the append. Returns warnings.
    """
    json_text.check_writable(record, path, what="nothing was appended")  # orjson writes NaN as null
    try:
        line = secrets.redact(orjson.dumps(record)) + b"\n"
    except orjson.JSONEncodeError as exc:  # an integer beyond 64 bits
        raise UserError(f"cannot be written as JSON: {exc}", path=path, hint="nothing was appended") from None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # a regular file only: a FIFO, a device or a directory in its place is refused (core.regular_file)
        fd = regular_file.open_fd(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, doing="cannot open for appending")
    except OSError as exc:
        raise UserError(f"cannot open for appending: {exc.strerror}", path=path,
                        hint="nothing was appended") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        warnings = _quarantine_torn_tail(fd, path)
        if precheck is not None:
            problem = precheck()
            if problem:
                raise UserError(problem, path=path, hint="nothing was appended")
        written = os.write(fd, line)
        if written != len(line):
            os.ftruncate(fd, os.fstat(fd).st_size - written)
            raise UserError(f"short write ({written} of {len(line)} bytes)", path=path,
                            hint="check free disk; nothing was appended")
        os.fsync(fd)
    finally:
        os.close(fd)  # closing the descriptor releases the flock
    return warnings


def read_records(path: Path, *, what: str = "line") -> Iterator[dict[str, Any]]:
    """Stream the complete lines of a JSON Lines file as objects. A missing file is empty; a torn last line (a
    writer died mid-write) is not yet a record; a broken, too deep or too long line (core.regular_file's cap) is a
    one-line error naming it, as is anything but a regular file."""
    return (record for _, record in read_numbered(path, what=what))


def read_numbered(path: Path, *, what: str = "line") -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each complete line, as read_records reads them."""
    try:
        handle = regular_file.open_stream(path)
    except FileNotFoundError:
        return
    with handle:
        for lineno, raw in enumerate(regular_file.lines(handle, path, what=what), start=1):
            if not raw.endswith(b"\n"):
                continue
            try:
                record = json_text.loads_line(raw)
            except json_text.LineError as exc:
                raise UserError(exc.message, path=path, place=f"{lineno}:{exc.column}",
                                hint=f"a broken {what} in the middle of the file") from None
            if not isinstance(record, dict):
                raise UserError(f"a {what} must be a JSON object", path=path, place=f"{lineno}:1")
            repeated = json_text.line_duplicate(raw, record)
            if repeated:
                raise UserError(repeated, path=path, place=f"{lineno}:1", hint=f"keep one of them in that {what}")
            yield lineno, record
