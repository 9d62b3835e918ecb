"""The progress seam of the phases that move bytes (install's downloads on the host, retrieve's SFTP): each
transfer is begun with its size, advanced with the bytes done so far, and ended. The command line shows a live bar
on a terminal; everywhere else the transfers are quiet."""

from __future__ import annotations

from typing import Protocol, final


class Transfers(Protocol):
    """Live byte progress of one phase's transfers, keyed by a label (the file's name)."""

    def begin(self, label: str, total: int | None, done: int = 0) -> None:
        """A transfer starts (total None: size unknown; done: bytes already there, as when resuming)."""
        ...

    def advance(self, label: str, done: int) -> None:
        """Bytes of this transfer done so far (not an increment)."""
        ...

    def end(self, label: str) -> None:
        """The transfer finished (or stopped); its bar stays as it was."""
        ...

    def close(self) -> None:
        """The phase is over: stop any live display."""
        ...


@final
class QuietTransfers:
    """No display: with --json, when the output is not a terminal, and in tests and the demo."""

    __slots__ = ()

    def begin(self, label: str, total: int | None, done: int = 0) -> None:
        return None

    def advance(self, label: str, done: int) -> None:
        return None

    def end(self, label: str) -> None:
        return None

    def close(self) -> None:
        return None
