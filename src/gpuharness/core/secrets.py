"""Secrets, in one place: the patterns that find them in text (API keys, bearer tokens, private keys, passwords), the
configured credential values to look for, and redaction. Errors, cassettes, health evidence and the audit all use
this module: one minimum length, one placeholder, redaction always before any cut."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, final

from gpuharness.core import regular_file
from gpuharness.core.errors import UserError

#: Environment variable whose value tests plant as an API key; always treated as a configured secret.
TEST_SECRET_ENV: Final = "GPUHARNESS_TEST_SECRET"
#: What a redacted secret becomes in recordings and evidence.
REDACTED: Final = "REDACTED"
#: Configured values shorter than this are not redacted by value (they would erase ordinary words).
MIN_VALUE_LENGTH: Final = 6

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


def shown(value: bytes) -> str:
    """How a found secret is shown: its first four characters and its length, never the rest."""
    text = value.decode("utf-8", "replace")
    return f"{text[:4]}… ({len(text)} chars)"


#: Lowercases ASCII letters (bytes.translate table).
_LOWER = bytes(c + 32 if 65 <= c <= 90 else c for c in range(256))
#: Every needle, lowercased (the case-sensitive ones then match a superset of their lines).
_NEEDLES: tuple[bytes, ...] = tuple(n.lower() for n in RAW_NEEDLES) + LOWER_NEEDLES
#: The bytes that no needle holds (newlines are kept): deleted before the needles are looked for.
_DELETE = bytes(c for c in range(256) if _LOWER[c] not in set(b"".join(_NEEDLES)) | {10})


def candidate_lines(data: bytes, limit: int | None = None) -> list[tuple[int, int]]:
    """(start, end) byte spans of the lines of data[:limit] that may hold a needle, in order.

    The needles are looked for in a lowercased copy from which every byte no needle holds is deleted (about 60% of
    a ledger), newlines kept. A needle in a line survives the deletion intact, in the same line, so every line that
    holds one is returned; a few more may be (letters brought together by the deletion), and PATTERNS decide.
    """
    stop = len(data) if limit is None else limit
    if stop == len(data) or (data[stop - 1:stop] == b"\n" and data.find(b"\n", stop) < 0):
        # what follows the limit is at most one unfinished line: translated too (data[:stop] is not copied), and
        # the needles are looked for before it only
        short = data.translate(_LOWER, _DELETE)
        short_stop = len(short) if stop == len(data) else short.rfind(b"\n") + 1
    else:
        short = data[:stop].translate(_LOWER, _DELETE)
        short_stop = len(short)
    hits: list[int] = []
    for needle in _NEEDLES:
        position = short.find(needle, 0, short_stop)
        while position >= 0:
            hits.append(position)
            end = short.find(b"\n", position, short_stop)
            if end < 0:
                break
            position = short.find(needle, end, short_stop)
    if not hits:
        return []
    hits.sort()
    lines: list[int] = []  # line indexes, ascending, unique
    line = 0
    previous = 0
    for position in hits:
        line += short.count(b"\n", previous, position)
        previous = position
        if not lines or lines[-1] != line:
            lines.append(line)
    spans: list[tuple[int, int]] = []
    line = 0
    start = 0
    for wanted in lines:
        while line < wanted:
            start = data.index(b"\n", start, stop) + 1
            line += 1
        end = data.find(b"\n", start, stop)
        spans.append((start, stop if end < 0 else end))
    return spans


#: For each of PATTERNS, lowercase literals one of which every match of it holds, at most REACH bytes after the
#: match's start: the pattern is tried only there (a report's "passed" need not run six regexes over a line of a
#: few hundred kilobytes).
PATTERN_NEEDLES: tuple[tuple[bytes, ...], ...] = (
    (b"rpa_",), (b"-----begin ",), (b"bearer",), (b"api_key", b"api-key", b"apikey", b"token", b"secret"),
    (b'"password"', b'"passwd"', b'"passphrase"'), (b"password=",))


#: How far before one of its needles a match of a pattern may start ("instance_" before "api_key"; a private key's
#: header is found by its "-----BEGIN ", whatever the algorithm's name between that and "PRIVATE KEY").
REACH = 16


def _matches(pattern: re.Pattern[bytes], segment: bytes, lowered: bytes,
             needles: tuple[bytes, ...]) -> Iterator[re.Match[bytes]]:
    """What pattern.finditer(segment) yields, trying the pattern only where a match can start: within REACH bytes
    before one of its needles (a report's lines can be hundreds of kilobytes long)."""
    starts: set[int] = set()
    for needle in needles:
        found = lowered.find(needle)
        while found >= 0:
            starts.update(range(max(0, found - REACH), found + 1))
            found = lowered.find(needle, found + 1)
    end = 0
    for start in sorted(starts):
        if start < end:
            continue
        match = pattern.match(segment, start)
        if match is not None:
            end = match.end()
            yield match


def find_secrets(data: bytes, limit: int | None = None, credentials: Iterable[Credential] = ()) -> Iterator[SecretHit]:
    """Every secret in data[:limit] (all of data by default), line by line, then every configured credential's
    value."""
    for start, end in candidate_lines(data, limit):
        segment = data[start:end]
        lowered = segment.lower()
        for (kind, pattern), needles in zip(PATTERNS, PATTERN_NEEDLES, strict=True):
            for match in _matches(pattern, segment, lowered, needles):
                value = match.group("value")
                lowered = value.lower()
                if lowered in PLACEHOLDERS or lowered.strip(b"<>") in PLACEHOLDERS:
                    continue
                if value.startswith(b"$") or set(value) <= set(b"*xX."):
                    continue
                yield SecretHit(kind, start + match.start("value"), shown(value))
    yield from credential_hits(data, credentials, limit)


def line_of(data: bytes, offset: int) -> int:
    """1-based line number of a byte offset."""
    return data.count(b"\n", 0, offset) + 1


def scan_file(path: Path, *, block: int = 8 << 20, credentials: tuple[Credential, ...] = ()
              ) -> Iterator[tuple[int, SecretHit]]:
    """(line, hit) for each secret in a file, streaming it in blocks that never split a line (but one longer than
    a JSON Lines line's cap, core.regular_file, which is cut: memory stays bounded)."""
    lineno = 1
    carry = b""
    with regular_file.open_stream(path) as handle:
        while True:
            chunk = handle.read(block)
            data = carry + chunk
            if not chunk:
                cut = len(data)
            else:
                cut = data.rfind(b"\n") + 1
                if cut == 0 and len(data) > regular_file.JSONL_LINE:
                    cut = len(data)
            head, carry = data[:cut], data[cut:]
            for hit in find_secrets(head, None, credentials):
                yield line_of(head, hit.offset) + lineno - 1, hit
            lineno += head.count(b"\n")
            if not chunk:
                break


def scan_tree(root: Path, *, skip: tuple[str, ...] = (), credentials: tuple[Credential, ...] = ()
              ) -> Iterator[tuple[Path, int, SecretHit]]:
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
        try:
            found = list(scan_file(path, credentials=credentials))
        except (UserError, FileNotFoundError):  # no longer a regular file (or gone) since it was listed
            continue
        for lineno, hit in found:
            yield path, lineno, hit


def configured_values(env_names: Iterable[str | None] = ()) -> tuple[str, ...]:
    """The credential values to keep out of every output: the planted test secret plus each named environment
    variable that is set (a provider's `credential_env`), at least MIN_VALUE_LENGTH long, longest first."""
    names = [TEST_SECRET_ENV, *[n for n in env_names if n]]
    values = {os.environ[n] for n in names if os.environ.get(n)}
    return tuple(sorted((v for v in values if len(v) >= MIN_VALUE_LENGTH), key=len, reverse=True))


def redact_values(text: str, values: Iterable[str], mask: str = REDACTED) -> str:
    """`text` with each value (at least MIN_VALUE_LENGTH long) replaced by `mask`. Redact before cutting a text to
    length: a cut value is no longer found."""
    for value in sorted((v for v in values if v and len(v) >= MIN_VALUE_LENGTH), key=len, reverse=True):
        text = text.replace(value, mask)
    return text


#: Secrets in free text (transcripts, logs) that no configured value names: private key blocks, bearer tokens and
#: `key: value` / `key=value` credentials; the part before the secret is kept.
TEXT_PATTERNS: Final = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)(authorization:\s*bearer\s+)\S+"),
    re.compile(r"(?i)((?:api[_-]?key|token|password|secret)\s*[=:]\s*)\S+"),
)


def scrub_text(text: str, values: Iterable[str] = ()) -> str:
    """Free text without secrets: configured values, then private key blocks, bearer tokens and key=value
    credentials, each replaced by REDACTED."""
    text = redact_values(text, values)
    for pattern in TEXT_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + REDACTED, text)
    return text


@final
@dataclass(frozen=True, slots=True)
class Credential:
    """A configured credential: its variable's name and the byte forms its value takes in a file (never shown)."""

    name: str
    needles: tuple[bytes, ...]
    length: int


def configured_credentials(env_names: Iterable[str | None] = ()) -> tuple[Credential, ...]:
    """The credentials named by these variables (a provider's `credential_env`; the planted test secret too) that
    are set, at least MIN_VALUE_LENGTH long."""
    credentials: list[Credential] = []
    for name in dict.fromkeys([TEST_SECRET_ENV, *[n for n in env_names if n]]):
        value = os.environ.get(name)
        if value and len(value) >= MIN_VALUE_LENGTH:
            credentials.append(Credential(name, value_needles(value), len(value)))
    return tuple(credentials)


def value_needles(value: str) -> tuple[bytes, ...]:
    """The byte forms a value takes in a JSON file: its UTF-8, and its JSON-escaped form when that differs (a value
    with a quote, a backslash, a control or non-ASCII character)."""
    plain = value.encode("utf-8", "surrogatepass")
    escaped = json.dumps(value)[1:-1].encode("ascii")
    return tuple(dict.fromkeys((plain, escaped)))


def credential_hits(data: bytes, credentials: Iterable[Credential], limit: int | None = None) -> Iterator[SecretHit]:
    """Where in data[:limit] a configured credential's value is written: named by its variable, never shown."""
    stop = len(data) if limit is None else limit
    for credential in credentials:
        for needle in credential.needles:
            found = data.find(needle, 0, stop)
            while found >= 0:
                yield SecretHit(f"the value of ${credential.name}", found, f"({credential.length} chars)")
                found = data.find(needle, found + len(needle), stop)
