"""JSON Schemas of the state files: strict on known fields, warnings for unknown ones.

Where a value names an entry of a table that packages above the core fill in (a deployment's runtime, a provider's
kind), the schema file says which table (`"x-gpuharness-table": "runtimes"`) and the loaded schema enumerates that
table's names: adding a runtime or a provider edits no schema."""

from __future__ import annotations

import datetime as dt
import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING, Any, final

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import ValidationError

# rfc3987_syntax builds a lark grammar at import time (on every CLI call) and only serves the
# iri/iri-reference formats, which no schema here uses; date-time, uri and the rest stay checked.
if "rfc3987_syntax" not in sys.modules:
    sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]

import jsonschema_rs

from gpuharness.core import json_text, tables

#: the keyword by which a schema node says its value is a name in one of the tables (core.tables)
TABLE_KEYWORD = "x-gpuharness-table"

SCHEMA_NAMES = ("providers", "machines", "deployments", "models", "workflows", "connections",
                "policy", "job", "transition", "plan", "observation", "reservations")


@final
@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """What a schema says about one place of a document: its JSON path and the message (an error, or a warning for
    an unknown field)."""

    json_path: str
    message: str


def load_schema(name: str) -> dict[str, Any]:
    """The packaged schema called name (see SCHEMA_NAMES), each table's names enumerated where it names one."""
    if name not in SCHEMA_NAMES:
        raise KeyError(f"unknown schema {name!r}")
    return _load_schema(name, _version(name))


@cache
def _text(name: str) -> str:
    return resources.files("gpuharness.core.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")


def _version(name: str) -> int:
    """What a loaded schema depends on besides its file: the tables' generation if it names one (only then are
    the tables filled), else nothing."""
    return tables.generation() if TABLE_KEYWORD in _text(name) else -1


@cache
def _load_schema(name: str, version: int) -> dict[str, Any]:
    schema: dict[str, Any] = _enumerated(json.loads(_text(name)))
    return schema


def _enumerated(node: Any) -> Any:
    """The schema with each node naming a table given `enum`: the table's names (and null where its type allows)."""
    if isinstance(node, list):
        return [_enumerated(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _enumerated(value) for key, value in node.items()}
    if TABLE_KEYWORD in out:
        kind = out.get("type")
        nullable = kind == "null" or (isinstance(kind, list) and "null" in kind)
        out["enum"] = [*tables.names(out[TABLE_KEYWORD]), *([None] if nullable else [])]
    return out


def validator(name: str) -> Draft202012Validator:
    """A checked, format-aware validator (jsonschema: the source of clear messages; imported only when a document
    needs explaining)."""
    return _validator(name, _version(name))


@cache
def _validator(name: str, version: int) -> Draft202012Validator:
    from jsonschema import Draft202012Validator

    schema = load_schema(name)
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _open_schema(node: Any) -> Any:
    """A copy of a schema that admits unknown fields (they are warnings, not errors)."""
    if isinstance(node, dict):
        return {k: _open_schema(v) for k, v in node.items()
                if not (k == "additionalProperties" and v is False)}
    if isinstance(node, list):
        return [_open_schema(v) for v in node]
    return node


_RFC3339 = re.compile(r"(\d{4})-(\d\d)-(\d\d)[Tt](\d\d):(\d\d):(\d\d)(?:\.\d+)?(?:[Zz]|([+-])(\d\d):(\d\d))")


def is_date_time(text: str) -> bool:
    """RFC 3339's date-time, as both validators read it: a leap second only at 23:59:60 UTC, and no year 0000,
    which jsonschema (and Python's datetime) refuses and jsonschema-rs alone would pass."""
    match = _RFC3339.fullmatch(text)
    if match is None:
        return False
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    sign, off_h, off_m = match.group(7), int(match.group(8) or 0), int(match.group(9) or 0)
    try:
        dt.datetime(year, month, day, hour, minute, min(second, 59))
    except ValueError:  # year 0000, a 30th of February, hour 24
        return False
    if off_h > 23 or off_m > 59 or second > 60:
        return False
    offset = (off_h * 60 + off_m) * (-1 if sign == "-" else 1)
    return second < 60 or (hour * 60 + minute - offset) % 1440 == 1439


#: The one place where the compiled validator's formats are made to agree with jsonschema's.
_FORMATS = {"date-time": is_date_time}


def strict_validator(name: str) -> Any:
    """A compiled jsonschema-rs validator of the schema as written (formats on, unknown fields refused)."""
    return _strict_validator(name, _version(name))


@cache
def _strict_validator(name: str, version: int) -> Any:
    return jsonschema_rs.Draft202012Validator(load_schema(name), validate_formats=True, formats=_FORMATS)


def fast_validator(name: str) -> Any:
    """A compiled jsonschema-rs validator for bulk yes/no checks (formats on, unknown fields allowed)."""
    return _fast_validator(name, _version(name))


@cache
def _fast_validator(name: str, version: int) -> Any:
    return jsonschema_rs.Draft202012Validator(_open_schema(load_schema(name)), validate_formats=True,
                                              formats=_FORMATS)


def _path(error: ValidationError) -> str:
    return str(error.json_path)


def check(name: str, document: Any) -> tuple[list[SchemaIssue], list[SchemaIssue]]:
    """Validate document; return (errors, warnings). Unknown fields are warnings.

    A document the compiled validator passes has neither; only one it fails is explained by jsonschema. A string
    that is not Unicode text (a lone surrogate, from a "\\ud800" escape or an undecodable argument) is an error at
    its place: the compiled validator cannot take it."""
    try:
        if strict_validator(name).is_valid(document):
            return [], []
    except UnicodeEncodeError:
        found = json_text.unwritable(document)
        return [SchemaIssue(found[0] if found else "$", "a string holds a lone surrogate (not Unicode text)")], []
    errors: list[SchemaIssue] = []
    warnings: list[SchemaIssue] = []
    for error in sorted(validator(name).iter_errors(document), key=lambda e: list(map(str, e.path))):
        if error.validator == "additionalProperties":
            warnings.append(SchemaIssue(_path(error), f"unknown field: {error.message}"))
            continue
        message = error.message
        if error.validator in ("anyOf", "oneOf") and error.context:
            best = min(error.context, key=lambda e: len(list(e.path)))
            message = best.message
        errors.append(SchemaIssue(_path(error), message))
    if not errors and not fast_validator(name).is_valid(document):
        # the compiled validator is the verdict: where jsonschema reads the schema more leniently (a pattern's `$`
        # before a trailing newline, in Python's re and not in ECMAScript's), its own errors say where
        errors = [SchemaIssue(_rs_path(error.instance_path), error.message)
                  for error in fast_validator(name).iter_errors(document)]
    return errors, warnings


def _rs_path(parts: list[str | int]) -> str:
    """A jsonschema-rs instance path in jsonschema's JSON path form: $.deployments[0].id."""
    return "$" + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in parts)


def matches(pattern: str, text: str) -> bool:
    """Whether text matches a JSON Schema pattern as the compiled validator reads it (ECMAScript: `$` only at the
    very end), for a value checked before the document that will hold it."""
    return bool(_pattern_validator(pattern).is_valid(text))


@cache
def _pattern_validator(pattern: str) -> Any:
    return jsonschema_rs.Draft202012Validator({"type": "string", "pattern": pattern})


def is_valid_fast(name: str, document: Any) -> bool:
    """Fast yes/no validation (unknown fields allowed); a lone surrogate is a no (check() says where)."""
    try:
        return bool(fast_validator(name).is_valid(document))
    except UnicodeEncodeError:
        return False
