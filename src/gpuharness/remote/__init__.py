"""The remote-exec seam: one batched exec with a deadline, and file retrieval, over SSH or locally."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, final

RemoteErrorKind = Literal["unreachable", "host_key_unknown", "host_key_changed", "auth", "timeout", "closed"]


@final
@dataclass(frozen=True, slots=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_status: int | None  # None when the deadline cut the command off
    timed_out: bool
    duration_s: float


class RemoteError(Exception):
    """A transport failure. Probes make one attempt: callers never retry on this."""

    def __init__(self, kind: RemoteErrorKind, message: str, *, target: str) -> None:
        self.kind = kind
        self.target = target
        super().__init__(f"{target}: {kind}: {message}")


class Remote(Protocol):
    """One connection to one target for one phase."""

    target: str

    def exec(self, script: str, *, deadline_s: float) -> ExecResult:
        """Run a POSIX shell script; drain stdout/stderr; never block past the deadline."""
        ...

    def get_file(self, remote_path: str, local_path: str, *, resume: bool = True,
                 deadline_s: float | None = None) -> int:
        """Copy a remote file (resumable); return bytes transferred. With deadline_s, never wait past it
        (RemoteError timeout), however the peer behaves."""
        ...

    def close(self) -> None: ...
