"""User-facing errors: one line naming the file and the place, exit code 2."""

from __future__ import annotations

from pathlib import Path
from typing import final

EXIT_USAGE = 2


@final
class UserError(Exception):
    """A problem with the user's input or state; printed as one line, never as a traceback."""

    __slots__ = ("hint", "path", "place", "what")

    def __init__(self, what: str, *, path: str | Path | None = None, place: str | None = None,
                 hint: str | None = None) -> None:
        self.what = what
        self.path = str(path) if path is not None else None
        self.place = place
        self.hint = hint
        super().__init__(self.line())

    def line(self) -> str:
        """The single line shown to the user."""
        where = self.path or ""
        if self.place:
            where = f"{where}:{self.place}" if where else self.place
        text = f"{where}: {self.what}" if where else self.what
        if self.hint:
            text += f" ({self.hint})"
        return " ".join(text.split("\n"))
