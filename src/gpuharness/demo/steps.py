"""The demo's step headers, as it goes: `demo step N/M: TITLE` per phase and `done in X s` after it, on stderr (stdout
keeps the summary, or its JSON). On a terminal a live line (rich) shows the running step, its elapsed time and the
last thing it reported; elsewhere (a pipe, a CI log) every line is plain and printed once."""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO, final

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from gpuharness.core.terminal import show, shown

#: every header starts so: `grep '^demo step'` reads the demo's phases out of its log
PREFIX = "demo step"


def watching(stream: TextIO) -> bool:
    """Whether a person watches a terminal: stdout and the stream are terminals and TERM is not dumb."""
    return sys.stdout.isatty() and stream.isatty() and os.environ.get("TERM") != "dumb"


@final
class Steps:
    """`begin(title)` ends the step before it (printing how long it took) and starts the next; `note(text)` is
    progress within a step (the live line on a terminal, a plain indented line elsewhere); `end()` after the last."""

    __slots__ = ("_console", "_live", "_progress", "_started", "_stream", "_task", "_title", "number", "total")

    def __init__(self, total: int, *, stream: TextIO | None = None, live: bool | None = None) -> None:
        self.total = total
        self.number = 0
        self._stream = stream if stream is not None else sys.stderr
        self._live = watching(self._stream) if live is None else live
        self._console = Console(file=self._stream, highlight=False) if self._live else None
        self._progress: Progress | None = None
        self._task: TaskID | None = None
        self._title = ""
        self._started = 0.0

    def begin(self, title: str) -> None:
        self.end()
        self.number += 1
        self._title = shown(title)
        self._started = time.monotonic()
        self._line(f"{PREFIX} {self.number}/{self.total}: {self._title}")
        if self._console is not None:  # a spinner, the step and its elapsed time, erased when it ends
            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=self._console, transient=True)
            self._task = self._progress.add_task(markup_escape(self._title), total=None)
            self._progress.start()

    def note(self, text: str) -> None:
        """Progress within the running step."""
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=markup_escape(f"{self._title}: {shown(text)}"))
        elif self._title:
            self._line(f"  {shown(text)}")

    def end(self) -> None:
        if not self._title:
            return
        if self._progress is not None:
            self._progress.stop()
            self._progress = self._task = None
        self._line(f"  done in {time.monotonic() - self._started:.1f} s")
        self._title = ""

    def _line(self, text: str) -> None:
        if self._console is not None:
            self._console.print(markup_escape(shown(text)))
        else:
            show(text, file=self._stream)
