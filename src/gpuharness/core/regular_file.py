"""Local files as the harness reads them: a regular file only, opened without blocking, read under its cap.

Every local file the harness reads or appends to is opened here. The open is `O_NONBLOCK` (a FIFO cannot block it)
and `fstat` on the descriptor decides (no race between a check and the open): a FIFO, a socket, a device or a
directory where a file belongs is one line naming the file and what it is, exit 2. Files the harness makes for itself
(claims, lock files, the torn-line quarantine, the audit's checkpoint files) are opened `O_NOFOLLOW`: a symbolic link
there is refused too. The state files people keep may be symbolic links (dotfiles) to a regular file.

Every read has a cap; a file or line over it is one line naming it, exit 2 (the audit: a finding naming it):

| what is read | cap |
|---|---|
| a state document (providers, machines, deployments, models, workflows, connections, policy) | 64 MiB |
| one line of a JSON Lines file (jobs, transitions, observations, the audit's job states) | 16 MiB, `JSONL_LINE` |
| a JSON Lines file as a whole | none: streamed line by line (a ledger of GBs is fine) |
| the audit's checkpoint (`audit/checkpoint.json`) | 64 MiB, `CHECKPOINT` |
| a claim file (its holder's pid) | 32 bytes, `CLAIM_PID`: the rest is never read |
| a recording: a probe transcript, a cassette, a recorded server catalog | 64 MiB, `RECORDING` |
| a file named on the command line: a graph, a node catalog, nvidia-smi output | 64 MiB, `INPUT` |
| a log given to `diagnose` | none: streamed line by line |

JSON from these files is then parsed under the depth bound of `core.json_text`.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO, Final

from gpuharness.core.errors import UserError
from gpuharness.core.json_text import loads_outside

MIB: Final = 1 << 20
STATE_DOCUMENT: Final = 64 * MIB
JSONL_LINE: Final = 16 * MIB
CHECKPOINT: Final = 64 * MIB
CLAIM_PID: Final = 32
RECORDING: Final = 64 * MIB
INPUT: Final = 64 * MIB

_HINT: Final = "put a regular file there (or remove it); nothing was changed"
#: the hint for a file named on the command line: a pipe's text goes through stdin
NAMED_HINT: Final = "name a regular file; a pipe's text can go through stdin where the command takes `-`"
_KINDS: Final = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISSOCK, "a socket"),
                 (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                 (stat.S_ISLNK, "a symbolic link"))


def kind_of(mode: int) -> str:
    """What a file of this mode is, in words ("a FIFO (named pipe)", "a directory", ...)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return "not a regular file"


def size_words(size: int) -> str:
    """A byte count as people read it (bytes, KiB, MiB or GiB)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", MIB), ("KiB", 1 << 10)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}".replace(".0 ", " ")
    return f"{size} bytes"


def _not_regular(path: Path, mode: int, doing: str, hint: str = _HINT) -> UserError:
    return UserError(f"{doing}: it is {kind_of(mode)}, not a regular file", path=path, hint=hint)


def _open_error(path: Path, exc: OSError, doing: str, follow: bool, hint: str) -> UserError:
    """The one line for a failed open; the file's kind when that is why (a socket, a link where none belongs)."""
    if exc.errno == errno.ELOOP and not follow and os.path.islink(path):
        try:
            target = kind_of(os.stat(path).st_mode)
        except OSError:  # dangling, or a loop
            target = "nothing"
        target = "a regular file" if target == "not a regular file" else target
        return UserError(f"{doing}: it is a symbolic link (to {target}), not a regular file", path=path, hint=hint)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0
    if exc.errno in (errno.ENXIO, errno.EISDIR, errno.ENOTDIR, errno.EOPNOTSUPP) and mode and not stat.S_ISREG(mode):
        return _not_regular(path, mode, doing, hint)
    other = "check the file's owner and mode; nothing was changed" if exc.errno == errno.EACCES else \
        "nothing was changed"
    return UserError(f"{doing}: {exc.strerror or exc}", path=path, hint=other)


def open_fd(path: Path, flags: int = os.O_RDONLY, *, follow: bool = True, mode: int = 0o644,
            doing: str = "cannot read", hint: str = _HINT) -> int:
    """A descriptor of the regular file at path, opened with flags (O_RDONLY; O_RDWR|O_APPEND|O_CREAT to append).

    FileNotFoundError propagates (the caller decides what a missing file means); anything that is not a regular
    file (a link, too, unless follow), and any other failure to open, is a UserError naming the file, `doing` first.
    """
    extra = os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags | extra, mode)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _open_error(Path(path), exc, doing, follow, hint) from None
    file_mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(file_mode):
        os.close(fd)
        raise _not_regular(Path(path), file_mode, doing, hint)
    return fd


def open_stream(path: Path, *, follow: bool = True, doing: str = "cannot read", hint: str = _HINT) -> BinaryIO:
    """The regular file at path, opened for buffered binary reading (see open_fd)."""
    return os.fdopen(open_fd(path, follow=follow, doing=doing, hint=hint), "rb")


def over_cap(path: Path, size: int, cap: int, what: str) -> UserError:
    """The one line for a file larger than its cap."""
    return UserError(f"{size_words(size)}, over the {size_words(cap)} cap of {what}", path=path,
                     hint="a file this large is not one the harness wrote; move it aside; nothing was changed")


def read_named(path: Path, *, what: str) -> bytes:
    """A file named on the command line (a graph, a node catalog, nvidia-smi output), whole, under INPUT: missing is
    a UserError too."""
    try:
        return read_bytes(path, INPUT, what=what, doing=f"cannot read {what}", hint=NAMED_HINT)
    except FileNotFoundError:
        raise UserError(f"cannot read {what}: no such file", path=path, hint="check the path") from None


def read_recording(path: Path, *, what: str) -> Any:
    """A recording's JSON (a probe transcript, a recorded catalog, a run's probe record): a regular file under
    RECORDING, parsed under core.json_text's depth bound. UserError: not a regular file, or over its cap;
    ValueError: not JSON, or nested too deeply; FileNotFoundError: none."""
    return loads_outside(read_bytes(path, RECORDING, what=what), what=f"{what} {path}")


def read_bytes(path: Path, cap: int, *, what: str, follow: bool = True, doing: str = "cannot read",
               hint: str = _HINT) -> bytes:
    """The whole regular file at path, refused (UserError) when it is over cap bytes (or grows past it)."""
    with open_stream(path, follow=follow, doing=doing, hint=hint) as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > cap:
            raise over_cap(path, size, cap, what)
        try:
            data = handle.read(cap + 1)
        except OSError as exc:
            raise UserError(f"{doing}: {exc.strerror or exc}", path=path, hint="nothing was changed") from None
    if len(data) > cap:
        raise over_cap(path, len(data), cap, what)
    return data


def size_of(path: Path, *, follow: bool = True, doing: str = "cannot read") -> int | None:
    """The size of the regular file at path, None when there is none (a special file is a UserError)."""
    try:
        fd = open_fd(path, follow=follow, doing=doing)
    except FileNotFoundError:
        return None
    try:
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def lines(handle: BinaryIO, path: Path, *, what: str = "line", first: int = 1,
          cap: int = JSONL_LINE) -> Iterator[bytes]:
    """The lines of an open file, each with its newline (the last may lack it), none longer than cap: a longer one
    is a UserError naming its line (numbered from `first`) and nothing past it is read."""
    read = handle.readline
    limit = cap + 1
    lineno = first - 1
    while True:
        try:
            raw = read(limit)
        except OSError as exc:
            raise UserError(f"cannot read: {exc.strerror or exc}", path=path, place=f"{lineno + 1}:1",
                            hint="nothing was changed") from None
        if not raw:
            return
        lineno += 1
        if len(raw) > cap:
            raise line_over_cap(path, lineno, cap, what)
        yield raw


def line_over_cap(path: Path | str, lineno: int, cap: int, what: str) -> UserError:
    """The one line for a line of a JSON Lines file longer than its cap."""
    return UserError(f"a {what} over the {size_words(cap)} cap of one line", path=path, place=f"{lineno}:1",
                     hint="no writer of the harness makes such a line; move the file aside; nothing was changed")
