"""The one error tree. Every exception class in gpuharness descends from `GpuharnessError`; its class attribute
`exit_code` is the command line's exit status for it, read in one place (`cli.main`).

    GpuharnessError          exit 1: a failure the harness met (provider, remote host, runtime, simulator)
    +-- UserError            exit 2: bad input or state, one line naming the file and the place
    +-- ProviderError        providers.base (+-- UnknownOutcome)
    +-- RemoteError          remote
    +-- ...                  each keeps its builtin kind too (ValueError, LookupError), so `except` clauses hold

`line()` is the message format: one line, secrets redacted.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, final

EXIT_USAGE = 2
MAX_WHAT = 800  # long enough for a composed cause + remedy; a quoted huge value is still elided


EXIT_FAILURE = 1


class GpuharnessError(Exception):
    """The base of every gpuharness exception; `exit_code` is what the command line returns for it."""

    exit_code: ClassVar[int] = EXIT_FAILURE

    def line(self) -> str:
        """The single line shown to the user, secrets redacted."""
        from gpuharness.core import secrets  # secrets raises UserError: imported when a line is made

        return " ".join(secrets.redact(str(self)).split("\n"))


@final
class UserError(GpuharnessError):
    """A problem with the user's input or state; printed as one line, never as a traceback."""

    __slots__ = ("hint", "path", "place", "what")
    exit_code: ClassVar[int] = EXIT_USAGE

    def __init__(self, what: str, *, path: str | Path | None = None, place: str | None = None,
                 hint: str | None = None) -> None:
        self.what = what
        self.path = str(path) if path is not None else None
        self.place = place
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        """The single line shown to the user (a long message, e.g. quoting a huge value, is elided)."""
        where = self.path or ""
        if self.place:
            where = f"{where}:{self.place}" if where else self.place
        from gpuharness.core import secrets  # secrets raises UserError: imported when a line is made

        what = secrets.redact(self.what)  # before the cut: a key cut in two is no longer found
        if len(what) > MAX_WHAT:
            what = f"{what[:MAX_WHAT // 2]} … {what[-MAX_WHAT // 2:]}"
        text = f"{where}: {what}" if where else what
        if self.hint:
            text += f" ({self.hint})"
        return " ".join(text.split("\n"))
