"""Audit findings: what broke, where, the numbers, and what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from gpuharness.core.rules import Rule


@final
@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by an audit rule: `where` names the file and place, or the deployment or job; `subject` is
    the deployment a per-deployment rule judged ("" for the others)."""

    rule: Rule
    where: str
    message: str
    subject: str = ""

    def line(self) -> str:
        """The finding as one readable line."""
        return f"{self.where}: {self.message}"
