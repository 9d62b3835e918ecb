"""Run a parsed GraphQL operation against a small schema: validate every selection first (HTTP 400 with
GRAPHQL_VALIDATION_FAILED, as Apollo answers), then resolve root fields and return only what was selected.
A resolver's FieldError becomes an entry of `errors` with its path, its field null, and HTTP 200."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core.errors import GpuharnessError
from gpuharness.sim.graphql_syntax import EnumValue, Field, Operation, Spread, Variable

SCALARS = frozenset({"String", "Int", "Float", "Boolean", "ID", "Void"})
ROOTS = {"query": "Query", "mutation": "Mutation"}


@final
@dataclass(frozen=True, slots=True)
class FieldType:
    """A field's type ("Pod", "[Pod]", "String") and the arguments it takes."""

    of: str
    args: tuple[str, ...] = ()

    @property
    def named(self) -> str:
        """The type's name without list brackets or non-null marks."""
        return self.of.strip("[]!")

    @property
    def is_list(self) -> bool:
        """Whether the field answers a list."""
        return self.of.startswith("[")


Schema = Mapping[str, Mapping[str, FieldType]]
Resolver = Callable[[dict[str, Any]], Any]


class FieldError(GpuharnessError):
    """A resolver's refusal: reported under `errors` with `extensions.code`, the field's value null."""

    def __init__(self, message: str, code: str = "INTERNAL_SERVER_ERROR") -> None:
        super().__init__(message)
        self.code = code


class RequestError(GpuharnessError):
    """A document the server refuses whole (validation, variables): HTTP 400."""

    def __init__(self, errors: list[dict[str, Any]]) -> None:
        super().__init__(errors[0]["message"])
        self.errors = errors


def _error(message: str, code: str, node: Field | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"message": message}
    if node is not None:
        entry["locations"] = [{"line": node.line, "column": node.column}]
    entry["extensions"] = {"code": code}
    return entry


def _value(raw: Any, variables: Mapping[str, Any]) -> Any:
    """A literal with variables substituted; enum values become their names."""
    if isinstance(raw, Variable):
        return variables.get(raw.name)
    if isinstance(raw, EnumValue):
        return raw.name
    if isinstance(raw, list):
        return [_value(v, variables) for v in raw]
    if isinstance(raw, dict):
        return {k: _value(v, variables) for k, v in raw.items()}
    return raw


def _included(directives: Mapping[str, Mapping[str, Any]], variables: Mapping[str, Any]) -> bool:
    if "skip" in directives and _value(directives["skip"].get("if"), variables) is True:
        return False
    return "include" not in directives or _value(directives["include"].get("if"), variables) is True


def _collect(selections: list[Field | Spread], type_name: str, op: Operation,
             variables: Mapping[str, Any]) -> list[Field]:
    """The fields selected on type_name, fragments expanded, @skip / @include applied."""
    found: list[Field] = []
    for selection in selections:
        if not _included(selection.directives, variables):
            continue
        if isinstance(selection, Field):
            found.append(selection)
            continue
        spread = selection
        if selection.fragment is not None:
            named = op.fragments.get(selection.fragment)
            if named is None:
                raise RequestError([_error(f'Unknown fragment "{selection.fragment}".', "GRAPHQL_VALIDATION_FAILED")])
            spread = named
        if spread.type_condition in (None, type_name):
            found += _collect(spread.selections, type_name, op, variables)
    return found


def _validate(fields: list[Field], type_name: str, schema: Schema, op: Operation, variables: Mapping[str, Any],
              errors: list[dict[str, Any]]) -> None:
    known = schema.get(type_name, {})
    for node in fields:
        if node.name == "__typename":
            continue
        spec = known.get(node.name)
        if spec is None:
            errors.append(_error(f'Cannot query field "{node.name}" on type "{type_name}".',
                                 "GRAPHQL_VALIDATION_FAILED", node))
            continue
        errors += [_error(f'Unknown argument "{a}" on field "{type_name}.{node.name}".', "GRAPHQL_VALIDATION_FAILED",
                          node) for a in node.arguments if a not in spec.args]
        scalar = spec.named in SCALARS
        if scalar and node.selections is not None:
            errors.append(_error(f'Field "{node.name}" must not have a selection since type "{spec.of}" has no '
                                 "subfields.", "GRAPHQL_VALIDATION_FAILED", node))
        elif not scalar and node.selections is None:
            errors.append(_error(f'Field "{node.name}" of type "{spec.of}" must have a selection of subfields. '
                                 f'Did you mean "{node.name} {{ ... }}"?', "GRAPHQL_VALIDATION_FAILED", node))
        elif not scalar and node.selections is not None:
            _validate(_collect(node.selections, spec.named, op, variables), spec.named, schema, op, variables,
                      errors)


def variables_of(op: Operation, given: Any) -> dict[str, Any]:
    """The operation's variables from the request's `variables` (defaults filled, required ones checked)."""
    supplied = given if isinstance(given, dict) else {}
    found: dict[str, Any] = {}
    for name, (kind, default) in op.variables.items():
        if name in supplied:
            found[name] = supplied[name]
        elif default is not None:
            found[name] = _value(default, {})
        elif kind.endswith("!"):
            raise RequestError([_error(f'Variable "${name}" of required type "{kind}" was not provided.',
                                       "BAD_USER_INPUT")])
    return found


def _project(value: Any, spec: FieldType, node: Field, schema: Schema, op: Operation,
             variables: Mapping[str, Any], path: list[str | int], errors: list[dict[str, Any]]) -> Any:
    if value is None or spec.named in SCALARS:
        return value
    if spec.is_list:
        item = FieldType(spec.named)
        return [_project(v, item, node, schema, op, variables, [*path, i], errors) for i, v in enumerate(value)]
    result: dict[str, Any] = {}
    for child in _collect(node.selections or [], spec.named, op, variables):
        if child.name == "__typename":
            result[child.key] = spec.named
            continue
        child_spec = schema[spec.named][child.name]
        raw = value.get(child.name) if isinstance(value, Mapping) else None
        try:
            if callable(raw):
                raw = raw(_value(child.arguments, variables))
        except FieldError as exc:
            errors.append({**_error(str(exc), exc.code, child), "path": [*path, child.key]})
            raw = None
        result[child.key] = _project(raw, child_spec, child, schema, op, variables, [*path, child.key], errors)
    return result


def execute(op: Operation, schema: Schema, roots: Mapping[str, Resolver], given_variables: Any) -> dict[str, Any]:
    """The response body for a parsed operation; RequestError when the whole request is refused (HTTP 400)."""
    root = ROOTS.get(op.kind)
    if root is None:
        raise RequestError([_error(f"{op.kind} operations are not supported", "GRAPHQL_VALIDATION_FAILED")])
    variables = variables_of(op, given_variables)
    fields = _collect(op.selections, root, op, variables)
    errors: list[dict[str, Any]] = []
    _validate(fields, root, schema, op, variables, errors)
    if errors:
        raise RequestError(errors)
    data: dict[str, Any] = {}
    for node in fields:
        if node.name == "__typename":
            data[node.key] = root
            continue
        spec = schema[root][node.name]
        try:
            value = roots[node.name](_value(node.arguments, variables))
        except FieldError as exc:
            errors.append({**_error(str(exc), exc.code, node), "path": [node.key]})
            data[node.key] = None
            continue
        data[node.key] = _project(value, spec, node, schema, op, variables, [node.key], errors)
    body: dict[str, Any] = {"data": data}
    if errors:
        body = {"errors": errors, "data": data}
    return body
