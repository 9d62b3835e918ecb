"""What a host's workspace holds at given paths, from one batched exec that follows no link: only a regular file
of one name, reached through real folders from the workspace down, is checksummed; anything else is named.

The host side of "a copy never follows a link". The script walks each path below the workspace one part at a
time and stops at the first link (`[ -L ]`, which does not follow it), so a link to the host's private key, to
a folder of keys, a dangling one or a chain is reported and never read. A FIFO, a device, a folder and a file with
other hard links (whose other name may lie outside the workspace) are reported too. Every answer line starts with
its path's index, so no name from the host is ever parsed back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, final

from gpuharness.remote import Remote, RemoteError
from gpuharness.remote.lines import lines_of
from gpuharness.remote.script import ShellScript

#: regular WS REL...: one line per REL (a path below WS): "I file SHA256 SIZE", or "I link N" (its N-th part is a
#: symbolic link), "I notdir N", "I missing", "I folder", "I fifo", "I special", "I hard N" (N names).
_REGULAR: Final = (
    'regular() { ws=$1; shift; i=0; for rel in "$@"; do p=$ws; rest=$rel; n=0; status=; '
    'while [ -z "$status" ]; do case $rest in */*) part=${rest%%/*}; rest=${rest#*/} ;; '
    '*) part=$rest; rest= ;; esac; n=$((n+1)); p=$p/$part; '
    'if [ -L "$p" ]; then status="link $n"; '
    'elif [ -n "$rest" ]; then if [ ! -e "$p" ]; then status=missing; elif [ ! -d "$p" ]; then status="notdir $n"; fi; '
    'elif [ ! -e "$p" ]; then status=missing; elif [ -d "$p" ]; then status=folder; '
    'elif [ -p "$p" ]; then status=fifo; elif [ ! -f "$p" ]; then status=special; '
    'else info=$(ls -ldn -- "$p" | { read -r mode links owner group size more; echo "$links $size"; }); '
    'links=${info%% *}; size=${info#* }; '
    'if [ "$links" != 1 ]; then status="hard $links"; '
    'else sum=$(sha256sum < "$p" | cut -d" " -f1); status="file $sum $size"; fi; fi; done; '
    'printf "%s %s\\n" "$i" "$status"; i=$((i+1)); done; }')

_LINE: Final = re.compile(r"(\d+) (file ([0-9a-f]{64}) (\d+)|link \d+|notdir \d+|missing|folder|fifo|special|hard \d+)")


@final
@dataclass(frozen=True, slots=True)
class Listed:
    """One path's answer: a regular file's sha256 and size, or why it is none (refused: not read)."""

    sha256: str | None = None
    size: int = 0
    refused: str | None = None  # "a symbolic link at output/keys; not followed", ...
    missing: bool = False


def _meaning(status: str, parts: tuple[str, ...]) -> Listed:
    word, _, number = status.partition(" ")
    if word == "file":
        sha, size = number.split(" ")
        return Listed(sha256=sha, size=int(size))
    if word == "missing":
        return Listed(missing=True)
    if word in ("link", "notdir"):
        where = "/".join(parts[:int(number)])
        kind = "a symbolic link" if word == "link" else "not a folder"
        return Listed(refused=f"{where} is {kind} on the host; not followed")
    reasons = {"folder": "a folder, not a regular file", "fifo": "a FIFO, not a regular file",
               "special": "a device or socket, not a regular file",
               "hard": f"a file with {number} hard links on the host (another name may lie outside the workspace)"}
    return Listed(refused=f"{'/'.join(parts)} is {reasons[word]}; not read")


def listed(remote: Remote, workspace: str, paths: list[tuple[str, ...]], deadline_s: float) -> list[Listed]:
    """What the host holds at each path (its parts below the workspace), in order, from one exec."""
    if not paths:
        return []
    script = ShellScript(workspace=workspace).code(_REGULAR).call("regular", workspace, *("/".join(p) for p in paths))
    result = remote.exec(script.text(), deadline_s=deadline_s)
    if result.timed_out:
        raise RemoteError("timeout", f"the checksums did not come back within {deadline_s:g} s",
                          target=remote.target)
    answers: dict[int, str] = {}
    for line in lines_of(result.stdout):
        match = _LINE.fullmatch(line)
        if match is not None and int(match.group(1)) < len(paths):
            answers.setdefault(int(match.group(1)), match.group(2))
    return [_meaning(answers[i], parts) if i in answers else
            Listed(refused=f"{'/'.join(parts)}: the host gave no answer for it; not read")
            for i, parts in enumerate(paths)]
