"""Remote text cut into lines: on newline only, the one rule for every text a host, a runtime or a recording sends."""

from __future__ import annotations


def lines_of(text: str) -> list[str]:
    """The lines of remote text, cut on "\\n" only. str.splitlines also cuts on \\r, \\x0b, \\x0c, \\x1c-\\x1e,
    \\x85, U+2028 and U+2029, so a host that prints one of those inside a line (a log line, a file or GPU name)
    would start a line of its own choosing; here they stay inside their line (a CR included: a CRLF line keeps
    its CR). A final newline ends the last line; it does not start an empty one."""
    if not text:
        return []
    parts = text.split("\n")
    if parts[-1] == "":
        parts.pop()
    return parts
