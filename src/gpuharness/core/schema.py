"""JSON Schemas of the state files: strict on known fields, warnings for unknown ones."""

from __future__ import annotations

import json
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

SCHEMA_NAMES = ("providers", "machines", "deployments", "models", "workflows", "connections",
                "policy", "job", "transition", "plan", "observation")


@final
@dataclass(frozen=True, slots=True)
class SchemaIssue:
    """What a schema says about one place of a document: its JSON path and the message (an error, or a warning for
    an unknown field)."""

    json_path: str
    message: str


@cache
def load_schema(name: str) -> dict[str, Any]:
    """The packaged schema called name (see SCHEMA_NAMES)."""
    if name not in SCHEMA_NAMES:
        raise KeyError(f"unknown schema {name!r}")
    text = resources.files("gpuharness.core.schemas").joinpath(f"{name}.schema.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def validator(name: str) -> Draft202012Validator:
    """A checked, format-aware validator (jsonschema: the source of clear messages; imported only when a document
    needs explaining)."""
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


@cache
def strict_validator(name: str) -> Any:
    """A compiled jsonschema-rs validator of the schema as written (formats on, unknown fields refused)."""
    return jsonschema_rs.Draft202012Validator(load_schema(name), validate_formats=True)


@cache
def fast_validator(name: str) -> Any:
    """A compiled jsonschema-rs validator for bulk yes/no checks (formats on, unknown fields allowed)."""
    return jsonschema_rs.Draft202012Validator(_open_schema(load_schema(name)), validate_formats=True)


def _path(error: ValidationError) -> str:
    return str(error.json_path)


def check(name: str, document: Any) -> tuple[list[SchemaIssue], list[SchemaIssue]]:
    """Validate document; return (errors, warnings). Unknown fields are warnings.

    A document the compiled validator passes has neither; only one it fails is explained by jsonschema."""
    if strict_validator(name).is_valid(document):
        return [], []
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
    return errors, warnings


def is_valid_fast(name: str, document: Any) -> bool:
    """Fast yes/no validation (unknown fields allowed)."""
    return bool(fast_validator(name).is_valid(document))
