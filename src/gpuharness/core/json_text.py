"""JSON text as the harness reads and writes it: numbers are finite and fit a float, strings are Unicode, no object
names a key twice, and nothing nests deeper than MAX_DEPTH.

Every state file is parsed here (`loads`); every JSON Lines line is parsed and checked here for depth and repeated
keys (`loads_line`, `line_duplicate`); every JSON answer from outside (a provider, a runtime, a host, a recording)
is parsed here (`loads_outside`); and every document or line is checked here before it is written
(`check_writable`). So a value that would make a file unreadable (NaN, an integer beyond a float, a lone
surrogate), ambiguous (`{"status": "destroyed", "status": "ready"}`: most parsers keep the last) or too deep for
the parsers and the schema check, which recurse (json and msgspec raise RecursionError, orjson stops at 1,024
levels and the rest of the harness recurses further), is refused with its place.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from pathlib import Path
from typing import Any, Final

import orjson

from gpuharness.core.errors import GpuharnessError, UserError

#: The most digits an integer may have and still fit a float (10**309 does not); Python's int() refuses 4,300.
MAX_INT_DIGITS: Final = 309
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE: Final = re.compile(r"\\u[dD][89a-fA-F]")
#: a quote before whitespace (padded JSON, or inside a string), and every quote that may close a key
_QUOTE_SPACE: Final = re.compile(rb'"[ \t\r\n]').search
_KEY_END: Final = re.compile(rb'"[ \t\r\n]*:').findall
#: How deep JSON may nest: far more than anything the harness reads needs (a ComfyUI node catalog nests 6 levels, a
#: ledger line's inputs a few more), far less than what recursive parsers and schema checks survive.
MAX_DEPTH: Final = 64
#: a JSON string (the unrolled form: linear, no backtracking), whose brackets are text, not nesting
_STRING: Final = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS: Final = bytes(byte for byte in range(256) if byte not in b"[]{}")
_STEP: Final = {0x5B: 1, 0x7B: 1, 0x5D: -1, 0x7D: -1}


class _Unreadable(GpuharnessError, ValueError):
    def __init__(self, token: str, why: str) -> None:
        super().__init__(token)
        self.token = token
        self.why = why


class _Duplicate(GpuharnessError, ValueError):
    pass


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _Duplicate
    return document


class _Pairs(list[tuple[str, Any]]):
    """An object as written, repeated keys kept (only to find where a repeat is)."""


def _first_repeat(value: Any, place: str) -> tuple[str, str] | None:
    if isinstance(value, _Pairs):
        seen: set[str] = set()
        for key, _ in value:
            if key in seen:
                return place, key
            seen.add(key)
        items: list[tuple[str, Any]] = [(f"{place}.{key}", item) for key, item in value]
    elif isinstance(value, list):
        items = [(f"{place}[{index}]", item) for index, item in enumerate(value)]
    else:
        return None
    for where, item in items:
        found = _first_repeat(item, where)
        if found:
            return found
    return None


def first_duplicate(text: str | bytes) -> tuple[str, str] | None:
    """(JSON path of the object, key) of the first key an object of text names twice, or None (text is valid JSON)."""
    try:
        parsed = json.loads(text, object_pairs_hook=_Pairs)
    except (ValueError, RecursionError):
        return None
    return _first_repeat(parsed, "$")


def _duplicate_error(text: str, path: Path | str) -> UserError:
    found = first_duplicate(text)
    where, key = found if found else ("$", "?")
    return UserError(f"duplicate key {json.dumps(key)} in the object at {where} (JSON keeps one of them silently)",
                     path=path, place=f"{where}.{key}",
                     hint="keep one of them; nothing was changed")


def too_deep(text: str | bytes | bytearray | memoryview, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON text nests arrays and objects deeper than limit (brackets inside strings do not count).

    Cheap for text with few brackets (two counts); otherwise strings are cut out and the brackets left are summed,
    all at C speed, before any parser recurses into the text."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit


def deep_message(limit: int = MAX_DEPTH) -> str:
    """What a refusal of too deep JSON says."""
    return f"nested too deeply: JSON deeper than {limit} levels (nothing the harness reads needs that many)"


class OutsideJsonError(GpuharnessError, ValueError):
    """JSON from outside that is not JSON, or nests deeper than MAX_DEPTH (a ValueError, as json's own errors)."""


def loads_outside(text: str | bytes | bytearray, *, what: str = "the answer") -> Any:
    """Parse JSON from outside the registry (a provider's or runtime's answer, a host's output, a recording, a file
    named on the command line): its depth is bounded before any parser recurses into it. The caller bounds its bytes
    (the HTTP seams and core.regular_file do). OutsideJsonError (a ValueError) names `what`."""
    if too_deep(text):
        raise OutsideJsonError(f"{what}: {deep_message()}")
    try:
        return json.loads(text)
    except RecursionError:  # unreachable below MAX_DEPTH; kept so no parser error escapes as a traceback
        raise OutsideJsonError(f"{what}: {deep_message()}") from None
    except ValueError as exc:
        raise OutsideJsonError(f"{what}: not JSON ({exc})") from None


class LineError(GpuharnessError, ValueError):
    """A JSON Lines line that cannot be read: not JSON, or nested deeper than MAX_DEPTH; `column` is where."""

    def __init__(self, message: str, column: int = 1) -> None:
        super().__init__(message)
        self.message = message
        self.column = column


def loads_line(raw: bytes | memoryview) -> Any:
    """One JSON Lines line, parsed by orjson after its depth is bounded (orjson alone stops only at 1,024 levels,
    and what reads the value next recurses); LineError says why a line cannot be read."""
    if too_deep(raw):
        raise LineError(deep_message())
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise LineError("blank line" if not bytes(raw).strip() else f"invalid JSON: {exc.msg}", exc.colno) from None


def key_bound(raw: bytes) -> int:
    """At least the number of keys written in raw (see line_duplicate)."""
    return raw.count(b'":') if _QUOTE_SPACE(raw) is None else len(_KEY_END(raw))


def count_keys(value: Any) -> int:
    """The keys of every object in a parsed JSON value (no recursion: a value of any depth is counted)."""
    count = 0
    pending = [value]
    while pending:
        item = pending.pop()
        kind = type(item)
        if kind is dict:
            count += len(item)
            pending.extend(inner for inner in item.values() if type(inner) in (dict, list))
        elif kind is list:
            pending.extend(inner for inner in item if type(inner) in (dict, list))
    return count


def line_duplicate(raw: bytes, record: Any) -> str | None:
    """Why a JSON Lines line (raw, as parsed into record by orjson or msgspec) names a key twice, or None.

    Cheap when it does not: every key is a string whose closing quote is followed by a colon (or by whitespace
    and a colon), so counting `":` (or, when a quote is followed by whitespace anywhere, every quote-space*-colon)
    bounds the keys written from above. When that bound equals the keys parsed, none repeats; otherwise (a quote
    and a colon inside a string, or a real repeat) the exact check decides."""
    if key_bound(raw) == count_keys(record):
        return None
    found = first_duplicate(raw)
    if found is None:
        return None
    where, key = found
    return f"duplicate key {json.dumps(key)} in the object at {where} (JSON keeps one of them silently)"


def _refuse_constant(token: str) -> Any:
    raise _Unreadable(token, f"{token} is not a finite number (JSON has no NaN or Infinity)")


def _finite_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise _Unreadable(token, f"{_short(token)} is not a finite number")
    return value


def _bounded_int(token: str) -> int:
    if len(token.lstrip("-")) > MAX_INT_DIGITS:
        raise _Unreadable(token, f"an integer of {len(token.lstrip('-'))} digits does not fit a number")
    value = int(token)
    try:
        float(value)
    except OverflowError:
        raise _Unreadable(token, f"{_short(token)} does not fit a number") from None
    return value


def _short(token: str) -> str:
    return token if len(token) <= 24 else f"{token[:10]}…{token[-6:]}"


def _line_column(text: str, token: str) -> tuple[int, int]:
    at = max(text.find(token), 0)
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def loads(text: str, path: Path | str) -> Any:
    """Parse a JSON document; a problem is a UserError at file:line:column (or file:$.json.path)."""
    if not text.strip():
        raise UserError("file is empty", path=path, place="1:1",
                        hint="write a JSON document, or run `gpuharness init`")
    if too_deep(text):
        raise UserError(deep_message(), path=path, place="1:1", hint="nothing was changed")
    try:
        document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                              parse_int=_bounded_int, object_pairs_hook=_unique)
    except _Duplicate:
        raise _duplicate_error(text, path) from None
    except _Unreadable as exc:
        line, column = _line_column(text, exc.token)
        raise UserError(exc.why, path=path, place=f"{line}:{column}",
                        hint="write a finite number or null; nothing was changed") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"invalid JSON: {exc.msg}", path=path, place=f"{exc.lineno}:{exc.colno}",
                        hint="fix the syntax at that place; nothing was changed") from None
    except RecursionError:
        raise UserError("invalid JSON: nested too deeply to read", path=path, place="1:1",
                        hint="nothing was changed") from None
    if _ESCAPED_SURROGATE.search(text):  # "\ud800" alone decodes to a str no file, terminal or pattern takes
        found = unwritable(document)
        if found is not None:
            raise UserError(found[1], path=path, place=found[0], hint="fix that string; nothing was changed")
    return document


def unwritable(value: Any, place: str = "$") -> tuple[str, str] | None:
    """(JSON path, why) of the first value JSON text cannot carry faithfully, or None."""
    kind = type(value)
    if kind is str:
        return (place, "a string holds a lone surrogate (not Unicode text)") if _SURROGATE.search(value) else None
    if kind is float:
        return None if math.isfinite(value) else (place, f"{value} is not a finite number")
    if kind is int:
        return None if -(10 ** (MAX_INT_DIGITS - 1)) < value < 10 ** (MAX_INT_DIGITS - 1) or _fits(value) \
            else (place, "an integer too large for a number")
    if kind is dict:
        for key, item in value.items():
            found = unwritable(key, f"{place} (a key)") if type(key) is str else None
            found = found or unwritable(item, f"{place}.{key}")
            if found:
                return found
    elif kind is list or kind is tuple:
        for index, item in enumerate(value):
            found = unwritable(item, f"{place}[{index}]")
            if found:
                return found
    return None


def _fits(value: int) -> bool:
    try:
        float(value)
    except OverflowError:
        return False
    return True


def check_writable(value: Any, path: Path | str, *, what: str = "nothing was written") -> None:
    """Refuse (UserError at file:$.path) a document or line with a value JSON text cannot carry faithfully."""
    found = unwritable(value)
    if found is not None:
        place, why = found
        raise UserError(why, path=path, place=place, hint=what)
