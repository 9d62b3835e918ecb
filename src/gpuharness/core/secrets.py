"""Secrets, in one place: the patterns that find them in text (API keys, bearer tokens, private keys, passwords), the
names of the fields, parameters and headers that hold them, the configured credential values and every form they
take (plain, base64 at any alignment, percent-, JSON- and HTML-escaped, UTF-16), and the one redactor that every
sink writes through (the terminal, state files and the journal, reports, transcripts, cassettes, audit findings):
one minimum length, one placeholder, redaction always before any cut."""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, final, overload

from gpuharness.core import json_text, regular_file
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


def placeholder(value: bytes) -> bool:
    """Whether a found value is no secret: a placeholder left by scrubbing, a `$VARIABLE` reference, or stars."""
    lowered = value.lower()
    return (lowered in PLACEHOLDERS or lowered.strip(b"<>") in PLACEHOLDERS or value.startswith(b"$")
            or set(value) <= set(b"*xX."))


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
                if placeholder(value):
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


#: The environment variables whose values are configured secrets, besides TEST_SECRET_ENV: the `credential_env` of
#: each providers.json this process has seen (watch_providers), kept for the life of the process.
_NAMES: dict[str, None] = {}
#: providers.json files watched (the latest few registries), by path: their (mtime_ns, size) when last read.
_WATCHED: dict[Path, tuple[int, int] | None] = {}
WATCH_AT_MOST: Final = 4


def watch_providers(path: Path) -> None:
    """Take the `credential_env` names of a providers.json (now, and whenever it changes) as configured secrets: a
    registry calls it for its own file, so every sink redacts its providers' keys."""
    _WATCHED.pop(path, None)
    _WATCHED[path] = None
    while len(_WATCHED) > WATCH_AT_MOST:
        del _WATCHED[next(iter(_WATCHED))]
    _refresh(path)


def _refresh(path: Path) -> None:
    try:
        status = path.stat()
    except OSError:
        return
    signature = (status.st_mtime_ns, status.st_size)
    if _WATCHED.get(path) == signature:
        return
    _WATCHED[path] = signature
    try:  # a regular file under the state files' cap, JSON under the depth bound, as the registry reads it
        document = json_text.loads_outside(regular_file.read_bytes(path, regular_file.STATE_DOCUMENT,
                                                                    what="providers.json"), what=str(path))
    except (OSError, ValueError, UserError):
        return  # the registry reports a broken file; the names it held before are still known
    entries = document.get("providers") if isinstance(document, dict) else None
    for entry in entries if isinstance(entries, list) else ():
        name = entry.get("credential_env") if isinstance(entry, dict) else None
        if isinstance(name, str) and name:
            _NAMES[name] = None


#: Values this process holds as keys (a provider client's key, a key generated for the simulator), whatever variable
#: they came from: at most REMEMBER_AT_MOST, the oldest forgotten first.
_REMEMBERED: dict[str, None] = {}
REMEMBER_AT_MOST: Final = 16


def remember(value: str | None) -> None:
    """Take a value this process uses as a key (at least MIN_VALUE_LENGTH long) as a configured secret."""
    if value and len(value) >= MIN_VALUE_LENGTH:
        _REMEMBERED.pop(value, None)
        _REMEMBERED[value] = None
        while len(_REMEMBERED) > REMEMBER_AT_MOST:
            del _REMEMBERED[next(iter(_REMEMBERED))]


def configured_names(env_names: Iterable[str | None] = ()) -> tuple[str, ...]:
    """TEST_SECRET_ENV, the watched providers' credential_env names and env_names, each once."""
    for path in list(_WATCHED):
        _refresh(path)
    return tuple(dict.fromkeys([TEST_SECRET_ENV, *_NAMES, *[n for n in env_names if n]]))


def configured_values(env_names: Iterable[str | None] = ()) -> tuple[str, ...]:
    """The credential values to keep out of every output: those of configured_names(env_names) that are set, at
    least MIN_VALUE_LENGTH long, longest first."""
    values = {os.environ[n] for n in configured_names(env_names) if os.environ.get(n)}
    return tuple(sorted((v for v in values if len(v) >= MIN_VALUE_LENGTH), key=len, reverse=True))


# How a value is written where it leaks: every form below is matched, so none is written.

#: JSON's short escapes (a value's `"` is written `\"` in a JSON file).
_JSON_SHORT: Final = {'"': b'\\"', "\\": b"\\\\", "/": b"\\/", "\b": b"\\b", "\f": b"\\f", "\n": b"\\n",
                      "\r": b"\\r", "\t": b"\\t"}
#: The bytes an escape starts with (_markers); `+` last (a space, only for a value that has one).
_ESCAPE_LEADS: Final = (b"%", b"\\", b"&#", b"+")


def _markers(characters: str) -> re.Pattern[bytes]:
    """The escapes that stand for one of these characters (a percent escape of one of their UTF-8 bytes, a JSON
    \\u of one of their UTF-16 units or their short JSON escape, an HTML character reference, `+` for a space): an
    escaped form holds at least one."""
    chars = set(characters)
    utf8 = sorted({b for c in chars for b in c.encode("utf-8", "surrogatepass")})
    units = sorted({u for c in chars for u in _utf16_units(c)})
    shorts = sorted(_JSON_SHORT[c][1:] for c in chars if c in _JSON_SHORT)
    parts = [b"%(?:" + b"|".join(_hex(b, 2) for b in utf8) + b")", rb"\\u(?:" + b"|".join(_hex(u, 4) for u in units)
             + b")", rb"&#"]
    if shorts:
        parts.append(rb"\\[" + re.escape(b"".join(shorts)) + b"]")
    if " " in chars:
        parts.append(rb"\+")
    return re.compile(b"|".join(parts))


#: The longest escape of one character (a JSON surrogate pair in a JSON string, `\\ud83d\\ude00`).
_LONGEST_ESCAPE: Final = 14


def _hex(number: int, width: int) -> bytes:
    """A regex for number in hex, either case: exactly width digits, or (width 0) any number of leading zeros."""
    digits = format(number, f"0{width}x") if width else format(number, "x")
    return (b"" if width else b"0*") + "".join(f"[{d}{d.upper()}]" if d.isalpha() else d for d in digits).encode()


def _utf16_units(char: str) -> tuple[int, ...]:
    """The UTF-16 code units of a character (a surrogate pair beyond the BMP), as JSON's \\u writes them."""
    code = ord(char)
    if code < 0x10000:
        return (code,)
    return (0xD800 + ((code - 0x10000) >> 10), 0xDC00 + ((code - 0x10000) & 0x3FF))


def _character(char: str) -> bytes:
    """A regex for one character of a value as written raw or escaped: UTF-8, percent-encoded, JSON \\u (a
    surrogate pair beyond the BMP; escaped once more in a JSON text inside a JSON string) or its short escape, an
    HTML character reference, `+` for a space."""
    raw = char.encode("utf-8", "surrogatepass")
    code = ord(char)
    forms = [re.escape(raw), b"".join(b"%" + _hex(byte, 2) for byte in raw),
             b"".join(b"\\\\{1,2}u" + _hex(unit, 4) for unit in _utf16_units(char)),
             b"&#0*" + str(code).encode() + b";", b"&#[xX]" + _hex(code, 0) + b";"]
    if char in _JSON_SHORT:
        forms.append(re.escape(_JSON_SHORT[char]))
    if char == " ":
        forms.append(rb"\+")
    return b"(?:" + b"|".join(forms) + b")"


def base64_forms(value: bytes) -> tuple[bytes, ...]:
    """The characters of value's base64 (standard and URL-safe alphabets) that its bytes alone decide, at each of
    the three alignments it can have inside a longer blob (`Basic base64(user:key)`, `base64(Bearer key)`)."""
    forms: list[bytes] = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + value)
        core = encoded[-(-8 * offset // 6):8 * (offset + len(value)) // 6]
        forms += [core, core.translate(_URLSAFE)]
    return tuple(dict.fromkeys(forms))


_URLSAFE: Final = bytes.maketrans(b"+/", b"-_")


def value_forms(value: str) -> tuple[bytes, ...]:
    """The literal byte forms of a value: UTF-8, base64_forms, UTF-16 (either byte order)."""
    plain = value.encode("utf-8", "surrogatepass")
    wide = (value.encode("utf-16-le", "surrogatepass"), value.encode("utf-16-be", "surrogatepass"))
    return tuple(dict.fromkeys((plain, *base64_forms(plain), *wide)))


@final
class Redactor:
    """Finds and masks secrets: configured values in every form (value_forms, and those forms with any of their
    characters percent-, JSON- or HTML-escaped), then the secrets no value names (PATTERNS, REDACTION_PATTERNS,
    private key blocks)."""

    __slots__ = ("_escaped", "_leads", "_literals", "_markers", "_texts", "_window", "values")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self.values = tuple(sorted({v for v in values if v and len(v) >= MIN_VALUE_LENGTH}, key=len, reverse=True))
        forms = sorted({f for v in self.values for f in value_forms(v)}, key=len, reverse=True)
        self._literals = tuple(forms)
        self._texts = tuple(sorted({f.decode("ascii") for v in self.values for f in base64_forms(v.encode(
            "utf-8", "surrogatepass"))} | set(self.values), key=len, reverse=True))
        self._window = max((len(t) for t in self._texts), default=0) * _LONGEST_ESCAPE
        self._markers = _markers("".join(self._texts)) if self._texts else None
        self._leads = _ESCAPE_LEADS if any(" " in t for t in self._texts) else _ESCAPE_LEADS[:-1]
        self._escaped: re.Pattern[bytes] | None = None  # compiled when an escape is first met (most text has none)

    def value_spans(self, data: bytes, limit: int | None = None) -> list[tuple[int, int]]:
        """(start, end) of each configured value in data[:limit], in any form; sorted, overlaps merged."""
        stop = len(data) if limit is None else limit
        spans: list[tuple[int, int]] = []
        for form in self._literals:
            found = data.find(form, 0, stop)
            while found >= 0:
                spans.append((found, found + len(form)))
                found = data.find(form, found + len(form), stop)
        for start, end in self._windows(data, stop):
            if self._escaped is None:
                self._escaped = re.compile(b"|".join(b"".join(map(_character, t)) for t in self._texts))
            spans += [(m.start(), m.end()) for m in self._escaped.finditer(data, start, end)]
        return _merged(spans)

    def _windows(self, data: bytes, stop: int) -> list[tuple[int, int]]:
        """The stretches of data[:stop] where an escaped form can be: around each escape (found from the bytes an
        escape starts with, so text without any costs a few fast scans)."""
        if self._markers is None:
            return []
        found: list[int] = []
        for lead in self._leads:
            at = data.find(lead, 0, stop)
            while at >= 0:
                if self._markers.match(data, at, stop) is not None:
                    found.append(at)
                at = data.find(lead, at + 1, stop)
        windows: list[tuple[int, int]] = []
        for at in sorted(found):
            start, end = max(0, at - self._window), min(stop, at + _LONGEST_ESCAPE + self._window)
            if windows and start <= windows[-1][1]:
                windows[-1] = (windows[-1][0], end)
            else:
                windows.append((start, end))
        return windows

    def bytes(self, data: bytes, mask: str = REDACTED) -> bytes:
        """data without secrets: each value's form, then each pattern's secret, replaced by mask."""
        replacement = mask.encode()
        if self.values:
            data = _replaced(data, self.value_spans(data), replacement)
        return _replaced(data, pattern_spans(data), replacement)

    def text(self, text: str, mask: str = REDACTED) -> str:
        """text without secrets (as bytes() on its UTF-8)."""
        return self.bytes(text.encode("utf-8", "surrogatepass"), mask).decode("utf-8", "surrogatepass")

    def data(self, value: Any, mask: str = REDACTED) -> Any:
        """A JSON value without secrets: every string in it (keys too) redacted."""
        if isinstance(value, str):
            return self.text(value, mask)
        if isinstance(value, dict):
            return {self.text(str(k), mask): self.data(v, mask) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [self.data(v, mask) for v in value]
        return value


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def _replaced(data: bytes, spans: list[tuple[int, int]], replacement: bytes) -> bytes:
    if not spans:
        return data
    parts: list[bytes] = []
    position = 0
    for start, end in spans:
        parts += [data[position:start], replacement]
        position = end
    parts.append(data[position:])
    return b"".join(parts)


#: Secrets in free text that the audit's PATTERNS leave (they are stricter, to keep its findings exact): key=value
#: credentials of any length and Authorization headers; group "value" is the secret. No value class holds a quote,
#: `<`, `&` or `,`: redacting a JSON or HTML text keeps it JSON or HTML.
REDACTION_PATTERNS: Final = (
    re.compile(rb"(?i:api[_-]?key|token|password|secret)\s*[=:]\s*(?P<value>[^\s\"'&,;<>]+)"),
    re.compile(rb"(?i:authorization)[\"']?\s*[:=]\s*[\"']?(?:(?i:bearer|basic|token|digest)\s+)?"
               rb"(?P<value>[^\s\"'&,;<>]+)"),
)
#: A private key block: its header to its footer, or without a footer the key material after the header.
PRIVATE_KEY_BLOCK: Final = re.compile(
    rb"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----(?:.{0,16384}?-----END [A-Z0-9 ]*PRIVATE KEY-----"
    rb"|(?:[A-Za-z0-9+/=:\s-]|\\[nr])*)", re.S)


_AUTHORIZATION: Final = re.compile(rb"(?i)authorization")


def _line_around(data: bytes, offset: int) -> tuple[int, int]:
    end = data.find(b"\n", offset)
    return data.rfind(b"\n", 0, offset) + 1, len(data) if end < 0 else end


def pattern_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each secret that a pattern finds in data (no configured value needed); sorted, merged."""
    spans: list[tuple[int, int]] = []
    if b"PRIVATE KEY-----" in data:
        spans += [m.span() for m in PRIVATE_KEY_BLOCK.finditer(data)]
    lines = candidate_lines(data)
    authorizations = [_line_around(data, m.start()) for m in _AUTHORIZATION.finditer(data)]  # not an audit needle
    for start, end in sorted(set(lines).union(authorizations)) if authorizations else lines:
        segment = data[start:end]
        for pattern in (*(p for _, p in PATTERNS), *REDACTION_PATTERNS):
            for match in pattern.finditer(segment):
                if not placeholder(match.group("value")):
                    spans.append((start + match.start("value"), start + match.end("value")))
    return _merged(spans)


_REDACTORS: dict[tuple[str, ...], Redactor] = {}


def redactor(values: Iterable[str | None] = ()) -> Redactor:
    """The redactor of the configured values (configured_values), the remembered ones and these."""
    wanted = tuple(sorted({*configured_values(), *_REMEMBERED,
                           *(v for v in values if v and len(v) >= MIN_VALUE_LENGTH)}))
    found = _REDACTORS.get(wanted)
    if found is None:
        if len(_REDACTORS) >= 16:
            _REDACTORS.clear()
        found = _REDACTORS[wanted] = Redactor(wanted)
    return found


@overload
def redact(data: str, values: Iterable[str | None] = (), *, mask: str = REDACTED) -> str: ...
@overload
def redact(data: bytes, values: Iterable[str | None] = (), *, mask: str = REDACTED) -> bytes: ...
def redact(data: str | bytes, values: Iterable[str | None] = (), *, mask: str = REDACTED) -> str | bytes:
    """What every sink writes: data without the configured values (and these) in any form, nor a secret that a
    pattern finds, each replaced by mask."""
    found = redactor(values)
    return found.bytes(data, mask) if isinstance(data, bytes) else found.text(data, mask)


def clip(text: str, limit: int, values: Iterable[str | None] = (), *, tail: bool = False) -> str:
    """text redacted, then cut to its first (or, with tail, last) limit characters: a cut key is no longer found,
    so nothing is cut before it is redacted."""
    clean = redact(text, values)
    return clean[-limit:] if tail else clean[:limit]


#: JSON fields and query parameters whose values are secrets wherever they appear.
SECRET_FIELDS: Final = frozenset({
    "api_key", "apikey", "instance_api_key", "jupyter_token", "password", "accesssecret", "access_secret",
    "secret", "token", "private_key", "ssh_private_key", "authorization",
})
#: Query parameters that carry a key (Vast and RunPod GraphQL accept ?api_key=; `key` is a key in a query only).
SECRET_PARAMS: Final = SECRET_FIELDS | {"key"}
#: Request headers that carry a credential (recorded as REDACTED, compared by scheme only).
CREDENTIAL_HEADERS: Final = frozenset({"authorization", "proxy-authorization", "x-api-key", "cookie"})
#: Response headers that carry session material (dropped from recordings).
SESSION_HEADERS: Final = frozenset({"set-cookie", "authorization", "www-authenticate", "proxy-authenticate"})
#: `name=value` of a secret query parameter in a URL or request line.
_QUERY_SECRET: Final = re.compile(r"(?i)\b((?:" + "|".join(sorted(SECRET_PARAMS, key=len, reverse=True))
                                  + r")=)[^&\s#]+")


def secret_field(name: object) -> bool:
    """Whether a JSON field of this name holds a secret."""
    return str(name).lower() in SECRET_FIELDS


def secret_param(name: object) -> bool:
    """Whether a query parameter of this name carries a key."""
    return str(name).lower() in SECRET_PARAMS


def mask_query(text: str, mask: str = REDACTED) -> str:
    """text with each secret query parameter's value (api_key=..., token=..., key=...) replaced by mask."""
    return _QUERY_SECRET.sub(lambda m: m.group(1) + mask, text)


@final
@dataclass(frozen=True, slots=True)
class Credential:
    """A configured credential: its variable's name, its length, and what finds its value in any form (never
    shown)."""

    name: str
    finder: Redactor
    length: int


def configured_credentials(env_names: Iterable[str | None] = ()) -> tuple[Credential, ...]:
    """The credentials named by these variables (a provider's `credential_env`; the planted test secret too) that
    are set, at least MIN_VALUE_LENGTH long."""
    credentials: list[Credential] = []
    for name in dict.fromkeys([TEST_SECRET_ENV, *[n for n in env_names if n]]):
        value = os.environ.get(name)
        if value and len(value) >= MIN_VALUE_LENGTH:
            credentials.append(Credential(name, Redactor((value,)), len(value)))
    return tuple(credentials)


def credential_hits(data: bytes, credentials: Iterable[Credential], limit: int | None = None) -> Iterator[SecretHit]:
    """Where in data[:limit] a configured credential's value is written, in any form: named by its variable, never
    shown."""
    for credential in credentials:
        for start, _ in credential.finder.value_spans(data, limit):
            yield SecretHit(f"the value of ${credential.name}", start, f"({credential.length} chars)")
