"""A rule, declared once: its id, its title and what it reads. The audit engine and the health checks both come
from tables of these, and the checks are parametrized from the same tables."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import final


@final
@dataclass(frozen=True, slots=True)
class Rule:
    """One rule of a family (`audit` or `health`). `id` is what findings and check ids carry (`ledger:schema`,
    `gpu_matches_order`); `reads` names the files or probe facts it judges, for the reader and the report."""

    id: str
    title: str
    reads: tuple[str, ...]


@final
class RuleTable:
    """The rules of one family, in declaration order; an id is declared once."""

    __slots__ = ("_rules", "family")

    def __init__(self, family: str, rules: Iterable[Rule]) -> None:
        self.family = family
        self._rules: dict[str, Rule] = {}
        for rule in rules:
            if rule.id in self._rules:
                raise ValueError(f"{family} rule {rule.id!r} is declared twice")
            self._rules[rule.id] = rule

    def __iter__(self) -> Iterator[Rule]:
        return iter(self._rules.values())

    def __len__(self) -> int:
        return len(self._rules)

    def __contains__(self, rule_id: object) -> bool:
        return rule_id in self._rules

    def __getitem__(self, rule_id: str) -> Rule:
        try:
            return self._rules[rule_id]
        except KeyError:
            raise KeyError(f"no {self.family} rule {rule_id!r}; declared: {', '.join(self._rules)}") from None

    def ids(self) -> tuple[str, ...]:
        return tuple(self._rules)
