"""Audit findings: what broke, where, the numbers, and what to do."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final


@final
@dataclass(frozen=True, slots=True)
class Finding:
    """One problem found by a rule: `where` names the file and place, or the deployment or job."""

    rule: str
    where: str
    message: str

    def line(self) -> str:
        """The finding as one readable line."""
        return f"{self.where}: {self.message}"
