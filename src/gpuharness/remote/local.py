"""The `local` transport: the same probe script as a subprocess, for an owned host that is this machine."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from typing import IO, BinaryIO, final

from gpuharness.core.base_dir import BaseDir
from gpuharness.core.confinement import remote_parts
from gpuharness.core.errors import UserError
from gpuharness.remote import ByteSink, ExecResult, LineSink, RemoteError, StreamLines

_CHUNK = 32768


@final
class LocalRemote:
    """Runs scripts with /bin/sh on this machine; a deadline kills the whole process group."""

    __slots__ = ("execs", "target")

    def __init__(self, target: str = "local") -> None:
        self.target = target
        self.execs = 0

    def exec(self, script: str, *, deadline_s: float, on_line: LineSink | None = None) -> ExecResult:
        """Run the script with /bin/sh -s; stdout lines go to on_line as they arrive; the deadline kills the
        whole process group."""
        self.execs += 1
        started = time.monotonic()
        end = started + deadline_s
        proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        err = bytearray()
        stderr = proc.stderr
        threads = [threading.Thread(target=_feed, args=(proc.stdin, script.encode()), daemon=True),
                   threading.Thread(target=lambda: err.extend(stderr.read()), daemon=True)]
        for thread in threads:
            thread.start()
        out, timed_out = _drain(proc.stdout.fileno(), end, StreamLines(on_line))
        if timed_out:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        for thread in threads:
            thread.join(timeout=5)
        proc.stdout.close()
        proc.stderr.close()
        return ExecResult(out.decode(errors="replace"), err.decode(errors="replace"),
                          None if timed_out else proc.returncode, timed_out, time.monotonic() - started)

    def get_file(self, remote_path: str, sink: BinaryIO, *, offset: int = 0, under: str | None = None,
                 progress: ByteSink | None = None, deadline_s: float | None = None) -> int:
        """Copy the file from byte offset into sink; opened from `under` down (or by itself) without following a
        link, so a link, or anything but a regular file of one name, is refused before a byte is read."""
        try:
            source = _open_regular(remote_path, under)
        except UserError as exc:
            raise RemoteError("refused", exc.what, target=self.target) from None
        if source is None:
            raise RemoteError("closed", f"no such file {remote_path}", target=self.target)
        moved = 0
        with os.fdopen(source, "rb") as src:
            src.seek(offset)
            while chunk := src.read(_CHUNK):
                sink.write(chunk)
                moved += len(chunk)
                if progress is not None:
                    progress(moved)
        return moved

    def close(self) -> None:
        return None


def _open_regular(path: str, under: str | None) -> int | None:
    """The file at path, open for reading through the folders below `under` opened without following links (the
    file alone not followed, without under); None when it is not there."""
    if under is not None:
        base, parts = under, remote_parts(under, path, what="the file")
    else:
        base, parts = os.path.dirname(path) or ".", (os.path.basename(path),)
    try:
        with BaseDir(base, create=False) as root, root.folder(parts[:-1], create=False) as folder:
            return folder.open_regular(parts[-1])
    except UserError:
        if not os.path.lexists(path):
            return None
        raise


def _feed(stdin: IO[bytes], data: bytes) -> None:
    try:
        with contextlib.suppress(OSError):  # the script may exit without reading all of itself
            stdin.write(data)
    finally:
        with contextlib.suppress(OSError):
            stdin.close()


def _drain(fd: int, end: float, lines: StreamLines) -> tuple[bytearray, bool]:
    """Read stdout until EOF or the deadline; (what was read, whether the deadline cut it off)."""
    out = bytearray()
    while True:
        remaining = end - time.monotonic()
        if remaining <= 0:
            return out, True
        ready, _, _ = select.select([fd], [], [], min(remaining, 0.5))
        if not ready:
            continue
        chunk = os.read(fd, _CHUNK)
        if not chunk:
            return out, False
        out += chunk
        lines.feed(chunk)
