"""The legacy reader: probe transcripts of probe v1-v4, which marked sections with `@@gpuharness` lines instead of
framing them. Only for replaying our own recordings offline (probe.probing.replay); a live probe is always read by
probe.framing, under its nonce."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpuharness.probe.framing import SECTION_CAP_BYTES, Frame, Frames
from gpuharness.remote.lines import lines_of

#: the marker line of probe v1-v4
MARK: Final = "@@gpuharness"
#: the last probe version that marked its sections
LAST_MARKED_VERSION: Final = 4
#: the sections of probe v1-v4
SECTIONS: Final = ("gpus", "header", "apps", "disk", "process", "ports", "log", "progress", "torch")


def read_marked(stdout: str, names: Sequence[str] = SECTIONS, *, cap: int = SECTION_CAP_BYTES) -> Frames:
    """The sections of a recorded v1-v4 transcript as frames. Held to the framing's rules where the old format can
    be: a repeated section, or one over the cap, is not believed, nor is a finished probe that lacks a section."""
    texts: dict[str, list[str]] = {}
    codes: dict[str, int] = {}
    current: str | None = None
    for line in lines_of(stdout):
        if line.startswith(MARK + " "):
            word = line[len(MARK) + 1:].strip()
            if word == "done":
                return _finished(texts, codes, names, cap)
            if word.startswith("end rc=") and current is not None:
                code = word[len("end rc="):]
                codes[current] = int(code) if code.lstrip("-").isdigit() else -1
                current = None
            elif word in texts:
                return Frames(problem=f"section {word!r} is repeated")
            else:
                current = word
                texts[current] = []
            continue
        if current is not None:
            texts[current].append(line)
    return _frames(texts, codes, cap, done=False)


def _finished(texts: dict[str, list[str]], codes: dict[str, int], names: Sequence[str], cap: int) -> Frames:
    missing = [name for name in names if name not in texts]
    if missing:
        return Frames(problem=f"section {missing[0]!r} is missing")
    return _frames(texts, codes, cap, done=True)


def _frames(texts: dict[str, list[str]], codes: dict[str, int], cap: int, *, done: bool) -> Frames:
    frames: dict[str, Frame] = {}
    for name, lines in texts.items():
        if name not in codes:  # the recording stops inside it (the exec's deadline)
            continue
        data = "".join(line + "\n" for line in lines).encode()
        if len(data) > cap:
            return Frames(problem=f"section {name!r} holds {len(data)} bytes, more than its cap of {cap}")
        frames[name] = Frame(name, codes[name], data)
    return Frames(frames, done=done)
