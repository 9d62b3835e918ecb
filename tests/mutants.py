"""Structural mutants of JSON documents for property tests: one value replaced, deleted or added somewhere."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import strategies as st


def paths_of(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path in a JSON value, the root () first."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths_of(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths_of(value, (*prefix, index))
    return found


@st.composite
def mutant(draw: st.DrawFn, document: Any, values: st.SearchStrategy[Any], keys: st.SearchStrategy[str]) -> Any:
    """A copy of document with one value replaced, deleted or added (a new key drawn from `keys`, or a list item);
    the root drawn replaces the whole document."""
    doc = copy.deepcopy(document)
    path = draw(st.sampled_from(paths_of(doc)))
    operation = draw(st.sampled_from(["replace", "delete", "add"]))
    value = draw(values)
    if not path:
        return value
    parent = doc
    for step in path[:-1]:
        parent = parent[step]
    if operation == "replace":
        parent[path[-1]] = value
    elif operation == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(keys)] = value
    else:
        parent.insert(path[-1], value)
    return doc
