"""A record's JSON form derived from its dataclass fields (msgspec's encoding), for the records whose JSON keys are
their fields' names: one `to_json` instead of one written out per class. A record whose JSON renames, adds or drops
a field (a computed message, a rounded figure) keeps its own."""

from __future__ import annotations

from typing import Any

import msgspec


class JsonFields:
    """Mixin for a dataclass: `to_json()` is each field under its own name, nested records likewise, tuples as
    lists."""

    __slots__ = ()

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values."""
        encoded: dict[str, Any] = _lists(msgspec.to_builtins(self))
        return encoded


def _lists(value: Any) -> Any:
    """value with every tuple in it a list, as JSON reads it back (msgspec keeps tuples)."""
    if isinstance(value, (tuple, list)):
        return [_lists(item) for item in value]
    if isinstance(value, dict):
        return {key: _lists(item) for key, item in value.items()}
    return value
