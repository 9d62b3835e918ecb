"""Secret detection: API keys, bearer tokens, private keys and passwords, always shown redacted."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import final

#: (kind, pattern); group "value" is the secret itself.
PATTERNS: tuple[tuple[str, re.Pattern[bytes]], ...] = (
    ("RunPod API key", re.compile(rb"(?P<value>rpa_[A-Za-z0-9]{20,})")),
    ("private key", re.compile(rb"(?P<value>-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----)")),
    ("bearer token", re.compile(rb"(?i:bearer)\s+(?P<value>[A-Za-z0-9._~+/=-]{16,})")),
    ("API key", re.compile(
        rb"(?i:api[_-]?key|instance_api_key|access[_-]?token|auth[_-]?token|secret[_-]?key|client[_-]?secret"
        rb"|access[_-]?secret)[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z0-9_\-.]{16,})")),
    ("password", re.compile(
        rb"(?i:\"(?:password|passwd|passphrase)\")\s*:\s*\"(?P<value>[^\"\s]+)\"")),
    ("password", re.compile(rb"(?i:password)=(?P<value>[^\s\"'&,;]+)")),
)

#: Literals that every secret above contains: case-sensitive ones, then ones looked up in lowercased text.
#: Only the lines holding one of them are matched against PATTERNS, so clean text costs a few fast scans.
RAW_NEEDLES: tuple[bytes, ...] = (b"rpa_", b"PRIVATE KEY")
LOWER_NEEDLES: tuple[bytes, ...] = (b"bearer", b"api", b"token", b"secret", b"pass")

#: Values that are placeholders left by scrubbing, not secrets.
PLACEHOLDERS = frozenset({b"redacted", b"***", b"filtered", b"<redacted>", b"xxxxxxxx", b"changeme-not-a-secret"})


@final
@dataclass(frozen=True, slots=True)
class SecretHit:
    """A secret at a byte offset of some text; `shown` is redacted."""

    kind: str
    offset: int
    shown: str


def redact(value: bytes) -> str:
    """Show a secret's first four characters and its length, never the rest."""
    text = value.decode("utf-8", "replace")
    return f"{text[:4]}… ({len(text)} chars)"


def candidate_lines(data: bytes, limit: int | None = None) -> list[tuple[int, int]]:
    """(start, end) byte spans of the lines of data[:limit] that hold a needle, in order."""
    spans: set[tuple[int, int]] = set()
    stop = len(data) if limit is None else limit

    def collect(haystack: bytes, needle: bytes) -> None:
        position = haystack.find(needle, 0, stop)
        while position >= 0:
            start = haystack.rfind(b"\n", 0, position) + 1
            end = haystack.find(b"\n", position, stop)
            end = stop if end < 0 else end
            spans.add((start, end))
            position = haystack.find(needle, end, stop)

    for needle in RAW_NEEDLES:
        collect(data, needle)
    lowered = data.lower()
    for needle in LOWER_NEEDLES:
        collect(lowered, needle)
    return sorted(spans)


def find_secrets(data: bytes, limit: int | None = None) -> Iterator[SecretHit]:
    """Every secret in data[:limit] (all of data by default), line by line."""
    for start, end in candidate_lines(data, limit):
        segment = data[start:end]
        for kind, pattern in PATTERNS:
            for match in pattern.finditer(segment):
                value = match.group("value")
                lowered = value.lower()
                if lowered in PLACEHOLDERS or lowered.strip(b"<>") in PLACEHOLDERS:
                    continue
                if value.startswith(b"$") or set(value) <= set(b"*xX."):
                    continue
                yield SecretHit(kind, start + match.start("value"), redact(value))


def line_of(data: bytes, offset: int) -> int:
    """1-based line number of a byte offset."""
    return data.count(b"\n", 0, offset) + 1


def scan_file(path: Path, *, block: int = 8 << 20) -> Iterator[tuple[int, SecretHit]]:
    """(line, hit) for each secret in a file, streaming it in blocks that never split a line."""
    lineno = 1
    carry = b""
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(block)
            data = carry + chunk
            if not chunk:
                cut = len(data)
            else:
                cut = data.rfind(b"\n") + 1
            head, carry = data[:cut], data[cut:]
            for hit in find_secrets(head):
                yield line_of(head, hit.offset) + lineno - 1, hit
            lineno += head.count(b"\n")
            if not chunk:
                break


def scan_tree(root: Path, *, skip: tuple[str, ...] = ()) -> Iterator[tuple[Path, int, SecretHit]]:
    """(file, line, hit) for each secret in the regular files under root (or root itself).

    `skip` names files or directories (relative to root) left out.
    """
    if root.is_file():
        files = [root]
    elif root.is_dir():
        files = sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink())
    else:
        return
    for path in files:
        relative = path.relative_to(root).parts if path != root else ()
        if (relative and (relative[0] in skip or "/".join(relative) in skip)) or path.suffix == ".lock":
            continue
        for lineno, hit in scan_file(path):
            yield path, lineno, hit
