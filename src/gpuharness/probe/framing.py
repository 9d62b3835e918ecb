"""The probe's output framing: each section's bytes, with its exit status, carried so that nothing a host prints can
forge a section. This module owns both halves: the shell that writes frames on the host and the reader that believes
them (and the one encoder, for recordings rewritten after scrubbing).

Each probe run has a fresh random nonce. A section's stdout goes to a file in a private directory (mktemp -d, else
mkdir -m 700 under $TMPDIR); then one frame carries it:

    <nonce> <section> <rc> <bytes>\\n     the header: the section's exit status and its length (wc -c)
    <od -An -v -tx1 lines>               its bytes, hex (od is POSIX: dash, busybox and coreutils all have it)
    <nonce> end <section>\\n

and the probe ends with `<nonce> done`. Why encoded, not raw bytes after a length: both transports decode stdout as
UTF-8 with replacement, so a host's invalid byte would change a raw section's length on the way; hex survives any
decoding, and no host text ever reaches stdout unencoded (od's output has no run of 32 hex digits, so it cannot
hold a header). A section is capped at SECTION_CAP_BYTES on the host (od -N); a longer one is not believed.

The reader refuses (probe_corrupt, naming the section) a frame under another nonce, an unknown or repeated section,
a body that does not decode to exactly its announced bytes, text outside any frame, and, when the probe reached its
end, a missing section. Output that stops inside a frame is a probe the exec's deadline cut off (not done)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, LiteralString, final

#: bytes of one section the host sends (od -N) and the reader believes
SECTION_CAP_BYTES: Final = 1 << 20
_NONCE_BYTES: Final = 16
_HEX_BODY: Final = re.compile(r"[0-9a-f \n]*")
_HEADER: Final = re.compile(r"([a-z][a-z_]{0,31}) (-?\d{1,9}) (\d{1,15})")
_NONCE_SHAPED: Final = re.compile(r"[0-9a-f]{32} ")

#: The framing's shell (POSIX sh): the private directory, then `_gh_frame NAME RC FILE` prints one frame. Reads
#: GH_NONCE and GH_CAP (set as quoted settings).
SHELL: Final[tuple[LiteralString, ...]] = (
    '_gh_dir=$(mktemp -d 2>/dev/null) || _gh_dir=""',
    'if [ -z "$_gh_dir" ] || [ ! -d "$_gh_dir" ]; then _gh_dir="${TMPDIR:-/tmp}/gh-probe.$GH_NONCE"; '
    'mkdir -m 700 "$_gh_dir" 2>/dev/null || _gh_dir=""; fi',
    "if [ -z \"$_gh_dir\" ]; then printf '%s fatal no_private_directory\\n' \"$GH_NONCE\"; exit 0; fi",
    "trap 'rm -rf \"$_gh_dir\"' EXIT",
    "_gh_frame() {",
    '  _gh_n=$(wc -c < "$3" 2>/dev/null); _gh_n=$((_gh_n + 0))',
    "  printf '%s %s %s %s\\n' \"$GH_NONCE\" \"$1\" \"$2\" \"$_gh_n\"",
    '  od -An -v -tx1 -N "$GH_CAP" "$3"',
    "  printf '%s end %s\\n' \"$GH_NONCE\" \"$1\"",
    "}",
)
#: what the host's shell says where it could make no private directory (the reader's message for it)
FATAL: Final = {"no_private_directory": "the probe could make no private directory for its sections (mktemp -d, "
                                        "then mkdir under $TMPDIR or /tmp): check the host's /tmp by hand"}


def new_nonce() -> str:
    """A fresh nonce for one probe run (128 random bits, hex)."""
    return secrets.token_hex(_NONCE_BYTES)


def section_lines(name: str, body: Sequence[str], rc: str) -> tuple[str, ...]:
    """A section's shell: its body's stdout into the private directory, then its frame (rc: a shell word that
    expands to the section's exit status)."""
    return ("{", *body, '} > "$_gh_dir/out"', f'_gh_frame {name} {rc} "$_gh_dir/out"')


DONE_LINE: Final = "printf '%s done\\n' \"$GH_NONCE\""


@final
@dataclass(frozen=True, slots=True)
class Frame:
    """One section as the host sent it: its exit status and the bytes it printed."""

    name: str
    rc: int
    data: bytes

    @property
    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


@final
@dataclass(frozen=True, slots=True)
class Frames:
    """The probe's output, read: each section's frame, whether the probe reached its end, and `problem`, why the
    output cannot be believed (None: it can)."""

    frames: Mapping[str, Frame] = field(default_factory=dict)
    done: bool = False
    problem: str | None = None


def output_bound(sections: int, cap: int = SECTION_CAP_BYTES) -> int:
    """The most characters an honest probe of `sections` sections prints (od: 49 per 16 bytes; headers)."""
    return sections * ((cap // 16 + 1) * 49 + 256) + 256


def read(stdout: str, nonce: str, names: Sequence[str], *, cap: int = SECTION_CAP_BYTES) -> Frames:
    """The frames of one probe run's stdout under its nonce; `names`: the sections the probe runs."""
    bound = output_bound(len(names), cap)
    if len(stdout) > bound:
        return Frames(problem=f"the probe printed {len(stdout)} characters, more than its {len(names)} sections of "
                              f"at most {cap} bytes each can")
    frames: dict[str, Frame] = {}
    prefix, pos = nonce + " ", 0
    while pos < len(stdout):
        eol = stdout.find("\n", pos)
        if eol < 0:
            break  # a line cut off: the exec's deadline
        line = stdout[pos:eol]
        if not line.startswith(prefix):
            return Frames(frames, problem=_stray(line, len(frames)))
        rest = line[len(prefix):]
        if rest == "done":
            return _done(frames, names, trailing=len(stdout) - eol - 1)
        if rest.startswith("fatal "):
            return Frames(frames, problem=FATAL.get(rest[6:], f"the probe stopped: {rest[6:60]!r}"))
        header = _HEADER.fullmatch(rest)
        if header is None:
            return Frames(frames, problem=f"a malformed frame header after {len(frames)} section(s): {rest[:60]!r}")
        name, rc, length = header.group(1), int(header.group(2)), int(header.group(3))
        if name not in names:
            return Frames(frames, problem=f"a section the probe does not run: {name!r}")
        if name in frames:
            return Frames(frames, problem=f"section {name!r} is repeated")
        end_line = f"\n{nonce} end {name}\n"
        end = stdout.find(end_line, eol)
        if end < 0:
            if _cut_off(stdout[eol + 1:], end_line[1:]):
                break  # the exec's deadline cut this frame off
            return Frames(frames, problem=f"section {name!r} has no end")
        frame = _decode(name, rc, length, stdout[eol + 1:end], cap)
        if isinstance(frame, str):
            return Frames(frames, problem=frame)
        frames[name] = frame
        pos = end + len(end_line)
    return Frames(frames)


def _cut_off(rest: str, end_line: str) -> bool:
    """Whether a frame without its end is one the output stops inside: hex lines, then part of a line (hex, or
    the start of its end line)."""
    whole, _, partial = rest.rpartition("\n")
    return bool(_HEX_BODY.fullmatch(whole)) and (bool(_HEX_BODY.fullmatch(partial)) or end_line.startswith(partial))


def _decode(name: str, rc: int, length: int, body: str, cap: int) -> Frame | str:
    """A frame's body decoded, or why it cannot be believed."""
    if length > cap:
        return (f"section {name!r} printed {length} bytes, more than its cap of {cap}: the probe believes only whole "
                "sections")
    if not _HEX_BODY.fullmatch(body):
        return f"section {name!r} holds text that is not its encoding"
    try:
        data = bytes.fromhex(body)
    except ValueError:
        return f"section {name!r} holds text that is not its encoding"
    if len(data) != length:
        return f"section {name!r} decodes to {len(data)} bytes, its header says {length}"
    return Frame(name, rc, data)


def _done(frames: dict[str, Frame], names: Sequence[str], *, trailing: int) -> Frames:
    if trailing:
        return Frames(frames, problem=f"{trailing} characters after the probe's end")
    missing = [name for name in names if name not in frames]
    if missing:
        return Frames(frames, problem=f"section {missing[0]!r} is missing")
    return Frames(frames, done=True)


def _stray(line: str, seen: int) -> str:
    if _NONCE_SHAPED.match(line):
        section = line[33:].split(" ", 1)[0]
        return f"a frame of section {section[:32]!r} under another run's nonce"
    return f"text outside any frame after {seen} section(s): {line[:60]!r}"


def encode(nonce: str, frames: Iterable[Frame], *, done: bool) -> str:
    """Frames as the host's shell prints them (od's layout: 16 bytes a line)."""
    out: list[str] = []
    for frame in frames:
        out.append(f"{nonce} {frame.name} {frame.rc} {len(frame.data)}\n")
        data = frame.data
        out.extend(" " + " ".join(f"{byte:02x}" for byte in data[i:i + 16]) + "\n" for i in range(0, len(data), 16))
        out.append(f"{nonce} end {frame.name}\n")
    if done:
        out.append(f"{nonce} done\n")
    return "".join(out)


def rewrite(stdout: str, nonce: str, names: Sequence[str], transform: Callable[[str], str]) -> str:
    """The probe's output with each section's text transformed (a recording's scrub), framed again under its nonce.
    A problem the reader found stays: it follows the frames read before it, as text outside any frame."""
    read_back = read(stdout, nonce, names)
    frames = [Frame(f.name, f.rc, transform(f.text).encode()) for f in read_back.frames.values()]
    text = encode(nonce, frames, done=read_back.done)
    if read_back.problem is not None:
        text += "recorded from a probe whose output could not be believed: " + transform(read_back.problem) + "\n"
    return text
