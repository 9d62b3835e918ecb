"""A base directory files are written under (retrieve's --to, the SSH transcripts' folder): opened once, and every
folder and file below it made relative to its descriptor, never through a link, never over a link or a hard link.

The base itself is the user's own path (followed as they named it). Below it, each folder is opened with
O_NOFOLLOW from the one above, a new file is created with O_EXCL, and a finished file gets its name by a link
that fails when anything is there already, so the check and the write are one operation. Names are checked against
the file system's own limit before anything is made.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Final, final

from gpuharness.core.errors import UserError

_FOLDER: Final = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
#: O_NONBLOCK: opening a FIFO never waits for a writer (it is refused once seen)
_READ: Final = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_REOPEN: Final = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEW: Final = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def kind_of(info: os.stat_result) -> str:
    """What an entry is, in words ("a regular file" only for one of one name)."""
    mode = info.st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO, not a regular file"
    if not stat.S_ISREG(mode):
        return "a device or socket, not a regular file"
    if info.st_nlink != 1:
        return f"a file with {info.st_nlink} hard links"
    return "a regular file"


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _refusal(fd: int, path: Path, name: str, outcome: str, exc: OSError) -> UserError:
    """The one-line error for an OS refusal at name in the folder fd (a link where O_NOFOLLOW met one, a folder
    where a file was to be, a name too long...)."""
    try:
        found: os.stat_result | None = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError:
        found = None
    if found is not None and exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.ENXIO):
        return UserError(f"{path / name} is {kind_of(found)}; "
                         f"{'not followed' if stat.S_ISLNK(found.st_mode) else outcome}")
    return UserError(f"{path / name}: {exc.strerror}; {outcome}")


@final
class Folder:
    """A folder under a base, open: its descriptor, its path (for messages) and its parts below the base."""

    __slots__ = ("fd", "parts", "path")

    def __init__(self, fd: int, path: Path, parts: tuple[str, ...]) -> None:
        self.fd = fd
        self.path = path
        self.parts = parts

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> Folder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def entry(self, name: str) -> os.stat_result | None:
        """What is at name (not following a link), or None when nothing is."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open_regular(self, name: str, *, outcome: str = "not read") -> int | None:
        """An existing regular file of one name, open for reading; None when nothing is there. A link, a folder, a
        FIFO or a file with other hard links there is refused (UserError, ending with outcome), and nothing is
        read from it."""
        try:
            fd = os.open(name, _READ, dir_fd=self.fd)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise _refusal(self.fd, self.path, name, outcome, exc) from None
        info = os.fstat(fd)
        if kind_of(info) != "a regular file":
            os.close(fd)
            raise UserError(f"{self.path / name} is {kind_of(info)}; {outcome}")
        return fd

    def resume(self, name: str) -> int:
        """The file name, open for writing: reopened when it is a regular file of one name, else whatever is there
        (a link, a file with other names) loses that name and a new file is made (O_EXCL)."""
        try:
            fd = os.open(name, _REOPEN, dir_fd=self.fd)
        except FileNotFoundError:
            fd = -1
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENXIO):
                raise _refusal(self.fd, self.path, name, "not written", exc) from None
            fd = -1
        if fd >= 0 and kind_of(os.fstat(fd)) == "a regular file":
            return fd
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)  # the name only: a link's target or a file's other names stay
        return self.create(name)

    def create(self, name: str, mode: int = 0o644) -> int:
        """A new file at name (O_EXCL: refused when anything is there), open for writing."""
        try:
            return os.open(name, _NEW, mode, dir_fd=self.fd)
        except OSError as exc:
            raise _refusal(self.fd, self.path, name, "not written", exc) from None

    def place(self, name: str, fd: int, source: Folder, source_name: str) -> None:
        """Give the finished file open as fd (named source_name in source) the name `name` here, never replacing
        anything: a hard link made only where nothing is, proved to be that same file, then the source name
        removed. A source name swapped meanwhile, or anything at name, is refused and nothing is left here."""
        mine = _identity(os.fstat(fd))
        there = source.entry(source_name)
        if there is None or _identity(there) != mine or not stat.S_ISREG(there.st_mode):
            raise UserError(f"{source.path / source_name} was replaced while it was written; not used")
        try:
            os.link(source_name, name, src_dir_fd=source.fd, dst_dir_fd=self.fd, follow_symlinks=False)
        except FileExistsError:
            found = self.entry(name)
            raise UserError(f"{self.path / name} is {kind_of(found) if found else 'there'} (it appeared while the "
                            "file was written); not replaced") from None
        except OSError as exc:
            raise _refusal(self.fd, self.path, name, "not written", exc) from None
        placed = self.entry(name)
        if placed is None or _identity(placed) != mine:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=self.fd)
            raise UserError(f"{source.path / source_name} was replaced while it was written; not used")
        os.unlink(source_name, dir_fd=source.fd)
        os.fsync(self.fd)

    def remove(self, name: str) -> None:
        """Remove the name here (never what a link points at)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=self.fd)

    def replace(self, name: str, data: bytes, *, mode: int = 0o644) -> None:
        """name := data, atomically: a new temporary file (O_EXCL) here, written and synced, renamed over name.
        Refused, with nothing changed, when name is a link, a folder or a file with other hard links."""
        found = self.entry(name)
        if found is not None and kind_of(found) != "a regular file":
            raise UserError(f"{self.path / name} is {kind_of(found)}; not replaced")
        temporary = f".gh-{secrets.token_hex(8)}.tmp"
        fd = self.create(temporary, mode)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.rename(temporary, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            self.remove(temporary)
            raise
        os.fsync(self.fd)

@final
class BaseDir:
    """The base: its descriptor and path. `folder()` opens (and with create, makes) the folders below it."""

    __slots__ = ("fd", "name_max", "path")

    def __init__(self, path: str | Path, *, create: bool = True) -> None:
        self.path = Path(path)
        try:
            if create:
                self.path.mkdir(parents=True, exist_ok=True)
            self.fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            raise UserError(f"cannot open the folder: {exc.strerror}", path=self.path,
                            hint="check it is a folder you may write to; nothing was written") from None
        self.name_max = os.fpathconf(self.fd, "PC_NAME_MAX")

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __enter__(self) -> BaseDir:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def fits(self, name: str) -> str:
        """name, when this file system can hold it as one name; else the one-line refusal."""
        try:
            size = len(os.fsencode(name))
        except UnicodeEncodeError:
            raise UserError(f"the name {shown(name)} cannot be written on this file system (it is no text in its "
                            "encoding); not written") from None
        if size > self.name_max:
            raise UserError(f"the name {shown(name)} is too long for this file system ({size} bytes; at most "
                            f"{self.name_max}); not written")
        return name

    def folder(self, parts: Sequence[str], *, create: bool = True) -> Folder:
        """The folder base/parts..., each step opened from the one above with O_NOFOLLOW (made when missing,
        with create): a link, or anything not a folder, on the way is refused (UserError)."""
        fd = os.dup(self.fd)
        path = self.path
        try:
            for part in parts:
                if not part or part in (".", "..") or "/" in part or "\0" in part:
                    raise ValueError(f"not one name: {part!r}")
                self.fits(part)
                fd = self._step(fd, path, part, create)
                path = path / part
        except BaseException:
            os.close(fd)
            raise
        return Folder(fd, path, tuple(parts))

    def _step(self, fd: int, path: Path, part: str, create: bool) -> int:
        """The folder part below fd, open (the fd above is closed once it is)."""
        for attempt in (1, 2):
            try:
                below = os.open(part, _FOLDER, dir_fd=fd)
            except FileNotFoundError:
                if not create or attempt == 2:
                    raise UserError(f"{path / part} is not there; nothing was written") from None
                with contextlib.suppress(FileExistsError):  # made meanwhile: opened below, a link still refused
                    os.mkdir(part, 0o755, dir_fd=fd)
                continue
            except OSError as exc:
                raise _refusal(fd, path, part, "not used", exc) from None
            os.close(fd)
            return below
        raise AssertionError("unreachable")

    def holds(self, folder: Folder) -> bool:
        """Whether folder is still base/its parts (no folder on the way swapped for a link, or moved, since it was
        opened)."""
        try:
            with self.folder(folder.parts, create=False) as again:
                return _identity(os.fstat(again.fd)) == _identity(os.fstat(folder.fd))
        except UserError:
            return False


def shown(name: str) -> str:
    """A name as one line shows it: quoted, its control characters and line separators escaped."""
    return repr(name) if name.isprintable() else ascii(name)


def replace_below(below: Path, path: Path, data: bytes, *, mode: int = 0o644, keep: bool = False) -> None:
    """path := data, atomically, where path lies below `below` (the user's own folder, followed as named): each
    folder between is opened without following a link (made when missing). With keep, a regular file already
    there is kept as it is (a content-addressed name). A link or a hard link at path is refused (UserError)."""
    parts = path.relative_to(below).parts
    with BaseDir(below) as base, base.folder(parts[:-1]) as folder:
        name = base.fits(parts[-1])
        found = folder.entry(name)
        if keep and found is not None and kind_of(found) == "a regular file":
            return
        folder.replace(name, data, mode=mode)

