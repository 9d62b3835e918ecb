"""Spend ceilings from policy.json, evaluated before every money-spending action."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final, Literal, final

ActionKind = Literal["launch", "job", "keep_alive"]

# The one tolerance for float money comparisons: a value equal to its ceiling is within it.
EPSILON: Final = 1e-9
#: how long provision's launch phase may take, whatever the retry counts (policy.json `launch_deadline_s`)
LAUNCH_DEADLINE_S: Final = 900.0


def exceeds(value: float, ceiling: float | None) -> bool:
    """True when value is above ceiling; no ceiling (None) is never exceeded. The one comparison every check uses."""
    return ceiling is not None and float(value) > float(ceiling) + EPSILON


@final
@dataclass(frozen=True, slots=True)
class Ceilings:
    """The money ceilings of policy.json, typed; None means the document sets none. Defaults live here only."""

    per_job_usd: float | None = None
    daily_usd: float | None = None
    monthly_usd: float | None = None
    max_cost_hr: float | None = None
    max_concurrent_deployments: float | None = None
    max_idle_minutes: float | None = None

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> Ceilings:
        def number(name: str) -> float | None:
            value = document.get(name)
            return None if value is None else float(value)

        return cls(*(number(name) for name in CEILING_NAMES))


CEILING_NAMES: Final = ("per_job_usd", "daily_usd", "monthly_usd", "max_cost_hr", "max_concurrent_deployments",
                        "max_idle_minutes")


@final
@dataclass(frozen=True, slots=True)
class Action:
    """A money-spending action about to happen, with what is already being spent."""

    kind: ActionKind
    provider: str | None = None
    cost_hr: float = 0.0
    job_cost_usd: float = 0.0
    has_shutdown_rule: bool = True
    idle_minutes: float | None = None
    live_burn_hr: float = 0.0
    live_deployments: int = 0
    spent_today_usd: float = 0.0
    spent_month_usd: float = 0.0


@final
@dataclass(frozen=True, slots=True)
class Decision:
    """Allow or deny, with the ceiling and the numbers behind it."""

    allowed: bool
    ceiling: str | None = None
    limit: float | None = None
    projected: float | None = None
    reason: str = "within every ceiling"
    checked: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"allowed": self.allowed, "ceiling": self.ceiling, "limit": self.limit,
                "projected": self.projected, "reason": self.reason, "checked": list(self.checked)}


@final
class Policy:
    """The ceilings of policy.json. Missing ceilings do not constrain."""

    __slots__ = ("ceilings", "doc")

    def __init__(self, document: dict[str, Any]) -> None:
        self.doc = document
        self.ceilings = Ceilings.from_document(document)

    def get(self, key: str, default: Any = None) -> Any:
        return self.doc.get(key, default)

    @property
    def cost_tolerance(self) -> tuple[float, float]:
        tol = self.doc.get("cost_tolerance") or {}
        return float(tol.get("abs_usd", 0.01)), float(tol.get("rel", 0.05))

    @property
    def launch_deadline_s(self) -> float:
        """How long provision's launch phase may take, all its attempts and waits together."""
        return float(self.doc.get("launch_deadline_s", LAUNCH_DEADLINE_S))

    def max_attempts(self, what: str, default: int) -> int:
        return int((self.doc.get("retry") or {}).get(what, default))

    def evaluate(self, action: Action) -> Decision:
        """Check an action against every ceiling that applies; the first breach denies."""
        checked: list[str] = []

        def limit(name: str) -> float | None:
            value = self.doc.get(name)
            if value is not None:
                checked.append(name)
            return None if value is None else float(value)

        allowed_providers = self.doc.get("allowed_providers")
        if action.provider is not None and allowed_providers is not None:
            checked.append("allowed_providers")
            if action.provider not in allowed_providers:
                return Decision(False, "allowed_providers", None, None,
                                f"provider {action.provider!r} is not in allowed_providers "
                                f"{allowed_providers}", tuple(checked))
        if action.kind == "launch":
            if self.doc.get("require_shutdown_rule") and not action.has_shutdown_rule:
                checked.append("require_shutdown_rule")
                return Decision(False, "require_shutdown_rule", None, None,
                                "every paid resource needs a shutdown rule (idle minutes, max hours or a "
                                "deadline)", tuple(checked))
            cap = limit("max_cost_hr")
            burn = action.live_burn_hr + action.cost_hr
            if exceeds(burn, cap):
                return Decision(False, "max_cost_hr", cap, burn,
                                f"live burn would be ${burn:.2f}/hr (now ${action.live_burn_hr:.2f}/hr + "
                                f"${action.cost_hr:.2f}/hr) > max_cost_hr ${cap:.2f}/hr", tuple(checked))
            cap = limit("max_concurrent_deployments")
            count = action.live_deployments + 1
            if cap is not None and count > cap:
                return Decision(False, "max_concurrent_deployments", cap, count,
                                f"{count} live deployments > max_concurrent_deployments {int(cap)}",
                                tuple(checked))
            cap = limit("max_idle_minutes")
            if cap is not None and action.idle_minutes is not None and action.idle_minutes > cap:
                return Decision(False, "max_idle_minutes", cap, action.idle_minutes,
                                f"idle rule {action.idle_minutes} min > max_idle_minutes {cap}",
                                tuple(checked))
        if action.kind == "job":
            cap = limit("per_job_usd")
            if exceeds(action.job_cost_usd, cap):
                return Decision(False, "per_job_usd", cap, action.job_cost_usd,
                                f"job would cost ${action.job_cost_usd:.4f} > per_job_usd ${cap:.2f}",
                                tuple(checked))
        extra = action.job_cost_usd if action.kind == "job" else 0.0
        for name, spent in (("daily_usd", action.spent_today_usd), ("monthly_usd", action.spent_month_usd)):
            cap = limit(name)
            projected = spent + extra
            if exceeds(projected, cap):
                return Decision(False, name, cap, projected,
                                f"spend would reach ${projected:.2f} > {name} ${cap:.2f}", tuple(checked))
        return Decision(True, checked=tuple(checked))
