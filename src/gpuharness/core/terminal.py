"""Text shown on a terminal: a control character that came from outside is shown as an escape, never obeyed."""

from __future__ import annotations

import re
import sys
from typing import Final, TextIO

#: C0 controls but newline and tab, DEL, C1 controls (CSI 0x9b, OSC 0x9d), bidirectional overrides and isolates,
#: and lone surrogates (not text; printing one raises).
UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def escape(text: str) -> str:
    """text with each unsafe character written as its Python escape (ESC -> \\x1b, U+202E -> \\u202e)."""
    if UNSAFE.search(text) is None:
        return text
    return UNSAFE.sub(lambda match: ascii(match.group())[1:-1], text)


def show(text: str, *, file: TextIO | None = None) -> None:
    """Print text, escaped, and flush (progress lines must appear as they happen)."""
    print(escape(text), file=file or sys.stdout, flush=True)
