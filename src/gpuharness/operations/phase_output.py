"""What a phase's script prints while it runs on the host, read line by line as the lines arrive: progress lines
are said at once, and the byte counts of its downloads (`GH-BYTES <bytes> <destination>`) drive the transfers'
live bars."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, final

from gpuharness.operations.context import Context

SAID = ("GH-PROGRESS", "GH-RETRY", "GH-GUARD")
BYTES = "GH-BYTES "


@final
class PhaseOutput:
    """The on_line sink of one phase exec. files: the manifest entries it downloads (path, size)."""

    __slots__ = ("_active", "_ctx", "_sizes")

    def __init__(self, ctx: Context, files: Iterable[Mapping[str, Any]] = ()) -> None:
        self._ctx = ctx
        self._sizes = {str(f["path"]): int(f.get("size") or 0) or None for f in files}
        self._active: set[str] = set()

    def line(self, text: str) -> None:
        if text.startswith(BYTES):
            self._bytes(text[len(BYTES):])
        elif text.startswith(SAID):
            rest = text.split(" ", 1)[1] if " " in text else ""
            for label in [a for a in self._active if a in rest]:  # that file's download is over (downloads run
                # one after another, so only the file it names can be open)
                self._end(label)
            self._ctx.say(f"  {rest}")

    def _bytes(self, rest: str) -> None:
        count, _, destination = rest.strip().partition(" ")
        if not count.isdigit():
            return
        label = self._label(destination)
        if label not in self._active:
            self._active.add(label)
            self._ctx.transfers.begin(label, self._sizes.get(label))
        self._ctx.transfers.advance(label, int(count))

    def _label(self, destination: str) -> str:
        """The manifest path the destination ends with (the workspace is expanded on the host; the download is
        counted in its `.part` file)."""
        destination = destination.removesuffix(".part")
        matches = [p for p in self._sizes if destination == p or destination.endswith("/models/" + p)]
        return max(matches, key=len) if matches else destination.rsplit("/models/", 1)[-1]

    def _end(self, label: str) -> None:
        self._active.discard(label)
        self._ctx.transfers.end(label)

    def close(self) -> None:
        """The exec is over (or failed): end every bar still open."""
        for label in sorted(self._active):
            self._end(label)
