"""Live byte bars (rich) for the operations' transfers, on a terminal only: with --json, or when stdout or stderr
is not a terminal, the transfers are quiet and only the result is printed."""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO, final

from rich.console import Console
from rich.markup import escape as markup_escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from gpuharness.core.terminal import shown
from gpuharness.operations.transfers import QuietTransfers, Transfers


def transfers_for(args: argparse.Namespace) -> Transfers:
    """A live bar on stderr when a person watches a terminal; otherwise nothing."""
    watching = sys.stdout.isatty() and sys.stderr.isatty() and os.environ.get("TERM") != "dumb"
    if getattr(args, "json", False) or not watching:
        return QuietTransfers()
    return TerminalTransfers(sys.stderr)


@final
class TerminalTransfers:
    """One bar per transfer, redrawn in place while any is running; a finished bar stays on the screen. Lines
    printed to stderr meanwhile appear above the bars."""

    __slots__ = ("_progress", "_stream", "_tasks")

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self._progress: Progress | None = None
        self._tasks: dict[str, TaskID] = {}

    def begin(self, label: str, total: int | None, done: int = 0) -> None:
        if self._progress is None:
            self._progress = Progress(TextColumn("  {task.description}"), BarColumn(), DownloadColumn(),
                                      TransferSpeedColumn(), TimeRemainingColumn(),
                                      console=Console(file=self._stream), transient=False)
            self._progress.start()
        # a host's file name: redacted and escaped as every line shown, and never read as rich markup
        self._tasks[label] = self._progress.add_task(markup_escape(shown(label)), total=total, completed=done)

    def advance(self, label: str, done: int) -> None:
        task = self._tasks.get(label)
        if self._progress is not None and task is not None:
            self._progress.update(task, completed=done)

    def end(self, label: str) -> None:
        self._tasks.pop(label, None)
        if not self._tasks:
            self.close()

    def close(self) -> None:
        progress, self._progress = self._progress, None
        self._tasks.clear()
        if progress is not None:
            progress.stop()
