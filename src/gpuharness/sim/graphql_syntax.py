"""Enough of the GraphQL language for the documents provider clients send: one operation (query or mutation) with
variables, aliases, arguments (every literal kind), nested selections, fragments and @include / @skip."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, final

from gpuharness.core.errors import GpuharnessError

_TOKEN = re.compile(r"""
    (?P<skip>[\s,]+|\#[^\n]*)
  | (?P<spread>\.\.\.)
  | (?P<punct>[!$():=@\[\]{}|&])
  | (?P<number>-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)
  | (?P<block>\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\")
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<name>[_A-Za-z][_0-9A-Za-z]*)
""", re.VERBOSE)


#: token kinds as graphql-js names them in messages
_KINDS = {"name": "Name", "string": "String", "number": "Int"}


class GraphQLSyntaxError(GpuharnessError, ValueError):
    """A document that does not parse; the message is graphql-js's ("Syntax Error: ...")."""


@final
@dataclass(frozen=True, slots=True)
class Variable:
    """`$name` in a value: replaced by the request's variable of that name."""

    name: str


@final
@dataclass(frozen=True, slots=True)
class EnumValue:
    """A bare name as a value (`cloudType: ALL`): resolvers see its text."""

    name: str


@final
@dataclass(slots=True)
class Field:
    """One selected field: `alias: name(args) @directives { selections }`."""

    name: str
    alias: str | None = None
    arguments: dict[str, Any] = field(default_factory=dict)
    directives: dict[str, dict[str, Any]] = field(default_factory=dict)
    selections: list[Field | Spread] | None = None
    line: int = 1
    column: int = 1

    @property
    def key(self) -> str:
        """Where the answer puts the field: its alias, else its name."""
        return self.alias or self.name


@final
@dataclass(slots=True)
class Spread:
    """`...Name` (fragment is the name) or `... on Type { }` (fragment None, selections inline)."""

    fragment: str | None
    type_condition: str | None = None
    selections: list[Field | Spread] = field(default_factory=list)
    directives: dict[str, dict[str, Any]] = field(default_factory=dict)


@final
@dataclass(slots=True)
class Operation:
    """The document's operation, with its variables' definitions and the fragments it may spread."""

    kind: str  # "query" | "mutation" | "subscription"
    name: str | None
    variables: dict[str, tuple[str, Any]]  # name -> (type text, default)
    selections: list[Field | Spread]
    fragments: dict[str, Spread] = field(default_factory=dict)


class _Parser:
    def __init__(self, source: str) -> None:
        self.tokens: list[tuple[str, str, int]] = []
        position = 0
        while position < len(source):
            found = _TOKEN.match(source, position)
            if found is None:
                raise self._error(position, f'Unexpected character: "{source[position]}".', source)
            if found.lastgroup != "skip":
                self.tokens.append((str(found.lastgroup), found.group(), position))
            position = found.end()
        self.source = source
        self.index = 0

    def _error(self, position: int, message: str, source: str | None = None) -> GraphQLSyntaxError:
        text = self.source if source is None else source
        line = text.count("\n", 0, position) + 1
        column = position - (text.rfind("\n", 0, position) + 1) + 1
        return GraphQLSyntaxError(f"Syntax Error: {message} ({line}:{column})")

    def peek(self, value: str | None = None) -> bool:
        if self.index >= len(self.tokens):
            return False
        kind, text, _ = self.tokens[self.index]
        return value is None or (text == value and kind in ("punct", "spread", "name"))

    def take(self, value: str | None = None, kind: str | None = None) -> tuple[str, str, int]:
        if self.index >= len(self.tokens):
            raise self._error(len(self.source), f"Expected {value or _KINDS.get(kind or '', 'more')}, found <EOF>.")
        token = self.tokens[self.index]
        if (value is not None and token[1] != value) or (kind is not None and token[0] != kind):
            wanted = value or _KINDS.get(kind or "", kind)
            raise self._error(token[2], f'Expected {wanted}, found "{token[1]}".')
        self.index += 1
        return token

    def name(self) -> str:
        return self.take(kind="name")[1]

    def where(self) -> tuple[int, int]:
        position = self.tokens[self.index][2] if self.index < len(self.tokens) else len(self.source)
        line = self.source.count("\n", 0, position) + 1
        return line, position - (self.source.rfind("\n", 0, position) + 1) + 1

    # values
    def value(self, const: bool = False) -> Any:
        kind, text, position = self.take()
        if kind == "punct" and text == "$" and not const:
            return Variable(self.name())
        if kind == "number":
            return float(text) if any(c in text for c in ".eE") else int(text)
        if kind == "string":
            return json.loads(text)
        if kind == "block":
            return text[3:-3].replace('\\"""', '"""').strip("\n")
        if kind == "name":
            literals: dict[str, Any] = {"true": True, "false": False, "null": None}
            return literals[text] if text in literals else EnumValue(text)
        if text == "[":
            items = []
            while not self.peek("]"):
                items.append(self.value(const))
            self.take("]")
            return items
        if text == "{":
            fields: dict[str, Any] = {}
            while not self.peek("}"):
                key = self.name()
                self.take(":")
                fields[key] = self.value(const)
            self.take("}")
            return fields
        raise self._error(position, f'Unexpected "{text}".')

    def arguments(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        if self.peek("("):
            self.take("(")
            while not self.peek(")"):
                key = self.name()
                self.take(":")
                found[key] = self.value()
            self.take(")")
        return found

    def directives(self) -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        while self.peek("@"):
            self.take("@")
            name = self.name()
            found[name] = self.arguments()
        return found

    # selections
    def selection_set(self) -> list[Field | Spread]:
        self.take("{")
        selections: list[Field | Spread] = []
        while not self.peek("}"):
            selections.append(self.selection())
        self.take("}")
        if not selections:
            raise self._error(self.tokens[self.index - 1][2], "Expected Name, found \"}\".")
        return selections

    def selection(self) -> Field | Spread:
        if self.peek("..."):
            self.take("...")
            if self.peek("on"):
                self.take("on")
                condition = self.name()
                directives = self.directives()
                return Spread(None, condition, self.selection_set(), directives)
            if self.peek("{") or self.peek("@"):
                directives = self.directives()
                return Spread(None, None, self.selection_set(), directives)
            return Spread(self.name(), directives=self.directives())
        line, column = self.where()
        first = self.name()
        alias = None
        if self.peek(":"):
            self.take(":")
            alias, first = first, self.name()
        found = Field(first, alias, self.arguments(), self.directives(), line=line, column=column)
        if self.peek("{"):
            found.selections = self.selection_set()
        return found

    # definitions
    def type_text(self) -> str:
        if self.peek("["):
            self.take("[")
            inner = self.type_text()
            self.take("]")
            text = f"[{inner}]"
        else:
            text = self.name()
        if self.peek("!"):
            self.take("!")
            text += "!"
        return text

    def variable_definitions(self) -> dict[str, tuple[str, Any]]:
        found: dict[str, tuple[str, Any]] = {}
        if self.peek("("):
            self.take("(")
            while not self.peek(")"):
                self.take("$")
                key = self.name()
                self.take(":")
                kind = self.type_text()
                default = None
                if self.peek("="):
                    self.take("=")
                    default = self.value(const=True)
                found[key] = (kind, default)
            self.take(")")
        return found

    def document(self) -> Operation:
        operations: list[Operation] = []
        fragments: dict[str, Spread] = {}
        while self.index < len(self.tokens):
            if self.peek("{"):
                operations.append(Operation("query", None, {}, self.selection_set()))
            elif self.peek("fragment"):
                self.take("fragment")
                key = self.name()
                self.take("on")
                condition = self.name()
                directives = self.directives()
                fragments[key] = Spread(key, condition, self.selection_set(), directives)
            else:
                kind = self.name()
                if kind not in ("query", "mutation", "subscription"):
                    raise self._error(self.tokens[self.index - 1][2], f'Unexpected Name "{kind}".')
                name = self.name() if self.peek() and self.tokens[self.index][0] == "name" else None
                variables = self.variable_definitions()
                self.directives()
                operations.append(Operation(kind, name, variables, self.selection_set()))
        if not operations:
            raise self._error(0, "Unexpected <EOF>.")
        if len(operations) > 1:
            raise GraphQLSyntaxError("Must provide operation name if query contains multiple operations.")
        operations[0].fragments = fragments
        return operations[0]


def parse(source: str) -> Operation:
    """The one operation of a document (with its fragments); GraphQLSyntaxError when it does not parse."""
    return _Parser(source).document()
