"""JSON text as the harness reads and writes it: numbers are finite and fit a float, strings are Unicode, and no
object names a key twice.

Every state file is parsed here (`loads`), every JSON Lines line is checked here for repeated keys
(`line_duplicate`), and every document or line is checked here before it is written (`check_writable`), so a value
that would make a file unreadable (NaN, an integer beyond a float, a lone surrogate) or ambiguous
(`{"status": "destroyed", "status": "ready"}`: most parsers keep the last) is refused with its place.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Final

from gpuharness.core.errors import UserError

#: The most digits an integer may have and still fit a float (10**309 does not); Python's int() refuses 4,300.
MAX_INT_DIGITS: Final = 309
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_ESCAPED_SURROGATE: Final = re.compile(r"\\u[dD][89a-fA-F]")
#: a quote before whitespace (padded JSON, or inside a string), and every quote that may close a key
_QUOTE_SPACE: Final = re.compile(rb'"[ \t\r\n]').search
_KEY_END: Final = re.compile(rb'"[ \t\r\n]*:').findall


class _Unreadable(ValueError):
    def __init__(self, token: str, why: str) -> None:
        super().__init__(token)
        self.token = token
        self.why = why


class _Duplicate(ValueError):
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


def key_bound(raw: bytes) -> int:
    """At least the number of keys written in raw (see line_duplicate)."""
    return raw.count(b'":') if _QUOTE_SPACE(raw) is None else len(_KEY_END(raw))


def count_keys(value: Any) -> int:
    """The keys of every object in a parsed JSON value."""
    kind = type(value)
    if kind is dict:
        count = len(value)
        for item in value.values():
            if type(item) in (dict, list):
                count += count_keys(item)
        return count
    if kind is list:
        return sum(count_keys(item) for item in value if type(item) in (dict, list))
    return 0


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
