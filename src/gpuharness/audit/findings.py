"""Audit findings: what broke, where, the numbers, and what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from gpuharness.core import secrets
from gpuharness.core.rules import Rule


@final
@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by an audit rule: `where` names the file and place, or the deployment or job; `subject` is
    the deployment a per-deployment rule judged ("" for the others). Its text is redacted (core.secrets) when it is
    made: a finding may quote what a file holds, and every report, terminal and checkpoint shows it."""

    rule: Rule
    where: str
    message: str
    subject: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "where", secrets.redact(self.where))
        object.__setattr__(self, "message", secrets.redact(self.message))

    def line(self) -> str:
        """The finding as one readable line."""
        return f"{self.where}: {self.message}"
