"""The remote-exec seam: one batched exec with a deadline, and file retrieval, over SSH or locally."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import BinaryIO, Literal, Protocol, final

from gpuharness.core.errors import GpuharnessError

#: refused: the remote path is a link, not a regular file, or not the file looked at (nothing was read)
RemoteErrorKind = Literal["unreachable", "host_key_unknown", "host_key_changed", "auth", "timeout", "closed", "refused"]


@final
@dataclass(frozen=True, slots=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_status: int | None  # None when the deadline cut the command off
    timed_out: bool
    duration_s: float


class RemoteError(GpuharnessError):
    """A transport failure. Probes make one attempt: callers never retry on this. `remedy`, when the transport
    knows one (the command that pins a host key), is kept apart so that no caller cuts it off."""

    def __init__(self, kind: RemoteErrorKind, message: str, *, target: str, remedy: str | None = None) -> None:
        self.kind = kind
        self.target = target
        self.message = message
        self.remedy = remedy
        super().__init__(f"{target}: {kind}: {message}" + (f" ({remedy})" if remedy else ""))


#: Called with each complete stdout line of an exec as it arrives (without its newline).
LineSink = Callable[[str], None]
#: Called with the bytes a transfer has moved so far.
ByteSink = Callable[[int], None]


@final
class StreamLines:
    """Cuts a byte stream into complete lines for a LineSink as the bytes arrive; a partial line waits."""

    __slots__ = ("_pending", "_sink")

    def __init__(self, sink: LineSink | None) -> None:
        self._sink = sink
        self._pending = bytearray()

    def feed(self, chunk: bytes) -> None:
        if self._sink is None:
            return
        self._pending += chunk
        while (cut := self._pending.find(b"\n")) >= 0:
            line = bytes(self._pending[:cut])
            del self._pending[:cut + 1]
            self._sink(line.decode(errors="replace"))


class Remote(Protocol):
    """One connection to one target for one phase."""

    target: str

    def exec(self, script: str, *, deadline_s: float, on_line: LineSink | None = None) -> ExecResult:
        """Run a POSIX shell script; drain stdout/stderr; never block past the deadline. on_line, when given, is
        called with each complete stdout line as it arrives (a long script's progress), before the result."""
        ...

    def get_file(self, remote_path: str, sink: BinaryIO, *, offset: int = 0, under: str | None = None,
                 progress: ByteSink | None = None, deadline_s: float | None = None) -> int:
        """Copy the remote regular file, from byte offset, into sink (a local file the caller opened, positioned
        where the bytes go); return bytes transferred. Never through a link: the file, and with `under` (the
        workspace) every folder between it and the file, is looked at without following links first; a link,
        anything but a regular file, or a file that is not the one looked at once opened, is refused (RemoteError
        "refused") before a byte is read. progress, when given, is called with the bytes transferred so far by
        this call as they arrive. With deadline_s, never wait past it (RemoteError timeout), however the peer
        behaves."""
        ...

    def close(self) -> None: ...
