"""Text shown on a terminal: redacted of secrets; a character that came from outside and prints as nothing, or steers
the terminal, is shown as an escape, never obeyed; and text made only of such characters (or spaces) reads as
empty."""

from __future__ import annotations

import re
import sys
import unicodedata
from typing import Final, TextIO

from gpuharness.core import secrets

#: Unicode categories that print as nothing or steer the terminal: controls (C0, DEL, C1: CSI 0x9b, OSC 0x9d),
#: format characters (zero-width space and joiners, bidirectional marks, overrides and isolates, the soft hyphen,
#: the byte order mark, tag characters), the line and paragraph separators, and lone surrogates (not text; printing
#: one raises).
INVISIBLE: Final = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
#: And what is empty besides them: space separators (U+0020, no-break space, U+3000, ...).
BLANK: Final = INVISIBLE | {"Zs"}
#: Newline and tab stay text (lines and tables are printed with them).
KEPT: Final = "\n\t"
#: The characters that may be invisible: all but printable ASCII, newline and tab (looked up one by one).
_SUSPECT: Final = re.compile("[^\t\n\x20-\x7e]")


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    return ascii(char)[1:-1] if unicodedata.category(char) in INVISIBLE else char


def escape(text: str) -> str:
    """text with each invisible character (INVISIBLE, but newline and tab) written as its Python escape
    (ESC -> \\x1b, U+202E -> \\u202e, U+200B -> \\u200b, U+2028 -> \\u2028)."""
    if _SUSPECT.search(text) is None:
        return text
    return _SUSPECT.sub(_shown, text)


def looks_empty(text: str | None) -> bool:
    """Whether text shows nothing: None, or made only of spaces, controls, format characters (U+200B, U+2060, ...),
    line and paragraph separators."""
    return not text or all(unicodedata.category(char) in BLANK for char in text)


def shown(text: str) -> str:
    """text as a terminal may show it: redacted (core.secrets), then escaped."""
    return escape(secrets.redact(text))


def show(text: str, *, file: TextIO | None = None) -> None:
    """Print text, redacted and escaped, and flush (progress lines must appear as they happen)."""
    print(shown(text), file=file or sys.stdout, flush=True)
