"""Vast's filter language as its CLI sends it: `{"num_gpus": {"eq": "1"}, "dph_total": {"lt": "0.5"}}`.

The CLI types values loosely (numbers arrive as strings, `in` lists as strings, booleans as JSON booleans), so
each column has a type and the expected value is coerced to it, as the server's SQL would. Shared by offer search
(POST /bundles/, PUT /search/asks/) and the v1 instance list's `select_filters` / `order_by`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from gpuharness.core.errors import GpuharnessError

Column = Literal["num", "bool", "str", "version", "geo", "json"]
OPERATORS = ("eq", "neq", "gt", "gte", "lt", "lte", "in", "notin")


class QueryError(GpuharnessError, ValueError):
    """A filter or ordering the server would refuse (400)."""


def version_number(value: Any) -> int | None:
    """"535.86.05" -> 535086005, as the CLI encodes driver versions; ints pass through."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    parts = str(value).split(".")
    if len(parts) != 3 or not all(p.isdigit() for p in parts):
        return None
    return int("".join(p.zfill(3) for p in parts))


def coerce(value: Any, kind: Column, column: str) -> Any:
    """The expected value as the column's type; QueryError when it cannot be one."""
    if value is None or kind in ("str", "geo", "json"):
        return value if value is None or kind == "json" else str(value)
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if value in (0, 1):
            return bool(value)
        raise QueryError(f"{column}: {value!r} is not a boolean")
    if kind == "version":
        number = version_number(value)
        if number is None:
            raise QueryError(f"{column}: {value!r} is not a driver version (like 535.86.05)")
        return number
    if isinstance(value, bool):
        raise QueryError(f"{column}: {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise QueryError(f"{column}: {value!r} is not a number") from None


def _field(row_value: Any, kind: Column) -> Any:
    if row_value is None:
        return None
    if kind == "version":
        return version_number(row_value)
    if kind == "num":
        return float(row_value)
    return row_value


def _geo_equal(row_value: Any, expected: Any) -> bool:
    # `geolocation=US` names a country: it matches "Texas, US" as well as the whole text
    text = str(row_value)
    return bool(text == expected or text.rsplit(",", 1)[-1].strip() == expected)


def _compare(op: str, value: Any, expected: Any, kind: Column) -> bool:
    if op in ("in", "notin"):
        found = any(_compare("eq", value, e, kind) for e in expected)
        return found if op == "in" else not found
    if op in ("eq", "neq"):
        equal = _geo_equal(value, expected) if kind == "geo" and value is not None else value == expected
        return equal if op == "eq" else not equal
    if value is None or expected is None:
        return False  # as SQL: NULL is neither above nor below anything
    if op == "gt":
        return bool(value > expected)
    if op == "gte":
        return bool(value >= expected)
    if op == "lt":
        return bool(value < expected)
    return bool(value <= expected)


Predicate = Callable[[Mapping[str, Any]], bool]


def predicate(column: str, condition: Any, kind: Column) -> Predicate:
    """One column's condition ({op: value, ...}; a bare value means eq) as a row test."""
    if not isinstance(condition, dict):
        condition = {"eq": condition}
    checks: list[tuple[str, Any]] = []
    for op, expected in condition.items():
        if op not in OPERATORS:
            raise QueryError(f"{column}: unknown operator {op!r} (one of {', '.join(OPERATORS)})")
        if op in ("in", "notin"):
            if not isinstance(expected, list):
                raise QueryError(f"{column}: {op} takes a list")
            checks.append((op, [coerce(e, kind, column) for e in expected]))
        else:
            checks.append((op, coerce(expected, kind, column)))

    def test(row: Mapping[str, Any]) -> bool:
        value = _field(row.get(column), kind)
        return all(_compare(op, value, expected, kind) for op, expected in checks)

    return test


def filters(query: Mapping[str, Any], columns: Mapping[str, Column], skip: Sequence[str] = (),
            strict: bool = False) -> list[Predicate]:
    """Row tests for each filtered column. Unknown columns: QueryError when strict, else ignored."""
    found: list[Predicate] = []
    for column, condition in query.items():
        if column in skip:
            continue
        kind = columns.get(column)
        if kind is None:
            if strict:
                raise QueryError(f"unknown column {column!r}")
            continue
        found.append(predicate(column, condition, kind))
    return found


def ordered(rows: list[dict[str, Any]], order: Sequence[tuple[str, bool]],
            columns: Mapping[str, Column]) -> list[dict[str, Any]]:
    """rows sorted by (column, descending) pairs, the first most significant; NULLs sort lowest."""
    def compare(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
        for column, descending in order:
            kind = columns.get(column, "str")
            result = _cmp(_field(a.get(column), kind), _field(b.get(column), kind))
            if result:
                return -result if descending else result
        return 0

    return sorted(rows, key=functools.cmp_to_key(compare))


def _cmp(a: Any, b: Any) -> int:
    if a is None or b is None:
        return (a is not None) - (b is not None)
    try:
        return int(a > b) - int(a < b)
    except TypeError:
        return (str(a) > str(b)) - (str(a) < str(b))


def offer_order(value: Any) -> list[tuple[str, bool]]:
    """The offer search's `order`: [["dph_total", "asc"], ...]."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(o, list) and len(o) == 2 for o in value):
        raise QueryError("order must be a list of [column, \"asc\" | \"desc\"] pairs")
    return [(str(column), _descending(direction)) for column, direction in value]


def list_order(value: Any) -> list[tuple[str, bool]]:
    """The v1 list's `order_by`: [{"col": "id", "dir": "asc"}, ...]."""
    if not isinstance(value, list) or not all(isinstance(o, dict) and "col" in o for o in value):
        raise QueryError("order_by must be a list of {\"col\", \"dir\"} objects")
    return [(str(o["col"]), _descending(o.get("dir", "asc"))) for o in value]


def _descending(direction: Any) -> bool:
    if direction not in ("asc", "desc"):
        raise QueryError(f"sort direction must be asc or desc, got {direction!r}")
    return bool(direction == "desc")
