"""policy.json as one typed object: the ceilings, retries, tolerances and health settings, each with its default in
this module only (absent from the document: the default of its field here; a new registry's document: STARTING).
Spend ceilings are evaluated before every money-spending action; `exceeds(value, ceiling)` is the one comparison."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Final, Literal, TypeVar, final

from gpuharness.core.json_fields import JsonFields

ActionKind = Literal["launch", "job", "keep_alive"]

# The one tolerance for float money comparisons: a value equal to its ceiling is within it.
EPSILON: Final = 1e-9
#: how long provision's launch phase may take, whatever the retry counts (policy.json `launch_deadline_s`)
LAUNCH_DEADLINE_S: Final = 900.0

#: The ceilings that limit money; a spending policy sets one of them, or says "ceilings": "none" with a reason.
MONEY_CEILINGS: Final = ("per_job_usd", "daily_usd", "monthly_usd", "max_cost_hr")


def exceeds(value: float, ceiling: float | None) -> bool:
    """True when value is above ceiling; no ceiling (None) is never exceeded. The one comparison every check uses."""
    return ceiling is not None and float(value) > float(ceiling) + EPSILON


def against(name: str, ceiling: float | None) -> str:
    """How a figure reads against a money ceiling: " of daily_usd $50.00", or " (no daily_usd ceiling)" where none
    applies (never "$0.00", which would read as a ceiling nothing may pass)."""
    return f" of {name} ${ceiling:,.2f}" if ceiling is not None else f" (no {name} ceiling)"


Section = TypeVar("Section")


def _section(cls: type[Section], document: Any) -> Section:
    """A settings dataclass from a policy.json object: each field typed as declared, its default where absent (or
    malformed: the schema rule reports it)."""
    if not isinstance(document, Mapping):
        return cls()
    values: dict[str, Any] = {}
    for item in fields(cls):  # type: ignore[arg-type]
        value = _number_text(document.get(item.name))
        kind = str(item.type)
        if isinstance(value, bool) and "bool" not in kind:
            continue
        if "bool" in kind and isinstance(value, bool):
            values[item.name] = value
        elif "float" in kind and isinstance(value, int | float):
            values[item.name] = float(value)
        elif "int" in kind and isinstance(value, int | float):
            values[item.name] = int(value)
    return cls(**values)


def _number_text(value: Any) -> Any:
    """A number written as text ("2") as its number; anything else as it is."""
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


@final
@dataclass(frozen=True, slots=True)
class Ceilings:
    """The money ceilings of policy.json, typed; None means the document sets none."""

    per_job_usd: float | None = None
    daily_usd: float | None = None
    monthly_usd: float | None = None
    max_cost_hr: float | None = None
    max_concurrent_deployments: float | None = None
    max_idle_minutes: float | None = None

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> Ceilings:
        return _section(cls, document)

    def to_json(self) -> dict[str, float | None]:
        return {name: getattr(self, name) for name in CEILING_NAMES}


CEILING_NAMES: Final = ("per_job_usd", "daily_usd", "monthly_usd", "max_cost_hr", "max_concurrent_deployments",
                        "max_idle_minutes")


@final
@dataclass(frozen=True, slots=True)
class Retry:
    """policy.json `retry`: how many attempts each kind of call gets."""

    max_job_attempts: int = 2
    max_api_attempts: int = 3
    max_launch_attempts: int = 2


@final
@dataclass(frozen=True, slots=True)
class CostTolerance:
    """policy.json `cost_tolerance`: how far a job's cost_usd may be from duration × rate (absolute + relative)."""

    abs_usd: float = 0.01
    rel: float = 0.05


@final
@dataclass(frozen=True, slots=True)
class HealthTimeouts:
    """policy.json `health_timeouts`, seconds: connect, the whole probe exec, nvidia-smi inside it, and the GPU
    measurement's exec."""

    connect_s: float = 15.0
    probe_s: float = 120.0
    nvidia_smi_s: int = 10
    measure_s: int = 60


@final
@dataclass(frozen=True, slots=True)
class HealthLimits:
    """policy.json's `disk_margin_gb` (free space beyond the model files) and `temperature_max_c`."""

    temperature_max_c: float = 85.0
    disk_margin_gb: float = 10.0


@final
@dataclass(frozen=True, slots=True)
class PerformanceFloor:
    """policy.json `performance_floor`: the fraction of the class's figures a GPU must reach (throughput), the
    fraction of its link width and generation (1.0: the full link), whether to measure (one more exec, in the
    service's interpreter) and whether a host that cannot be measured (no torch) fails."""

    throughput: float = 0.85  # of what a healthy card of the class reaches (gpu.classes `expected_*`)
    pcie_width: float = 1.0
    pcie_gen: float = 1.0
    measure: bool = False
    require_measurement: bool = False

    @classmethod
    def from_policy(cls, document: Mapping[str, Any]) -> PerformanceFloor:
        """The floor of a policy document (its defaults where the key or a field is absent)."""
        return _section(cls, document.get("performance_floor"))


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
class Decision(JsonFields):
    """Allow or deny, with the ceiling and the numbers behind it."""

    allowed: bool
    ceiling: str | None = None
    limit: float | None = None
    projected: float | None = None
    reason: str = "within every ceiling"
    checked: tuple[str, ...] = field(default=())


#: What a new registry's policy.json starts with (`gpuharness init`), besides its provider list: ceilings to review,
#: and the sections' defaults written out.
STARTING: Final[Mapping[str, Any]] = {
    "per_job_usd": 5.0, "daily_usd": 50.0, "monthly_usd": 500.0, "max_cost_hr": 10.0,
    "max_concurrent_deployments": 4, "max_idle_minutes": 30, "retry": asdict(Retry()),
    "require_shutdown_rule": True, "cost_tolerance": asdict(CostTolerance()),
    **{name: int(value) for name, value in asdict(HealthLimits()).items()},
}


@final
class Policy:
    """policy.json, typed. Missing ceilings do not constrain; every other setting has its default above."""

    __slots__ = ("allowed_providers", "ceilings", "ceilings_none", "disk_margin_gb", "health_timeouts",
                 "launch_deadline_s", "performance_floor", "require_shutdown_rule", "retry", "temperature_max_c",
                 "tolerance")

    def __init__(self, document: Mapping[str, Any]) -> None:
        self.ceilings = Ceilings.from_document(document)
        self.retry = _section(Retry, document.get("retry"))
        #: how long provision's launch phase may take, all its attempts and waits together
        self.launch_deadline_s = float(document.get("launch_deadline_s", LAUNCH_DEADLINE_S))
        self.tolerance = _section(CostTolerance, document.get("cost_tolerance"))
        self.health_timeouts = _section(HealthTimeouts, document.get("health_timeouts"))
        self.performance_floor = PerformanceFloor.from_policy(document)
        providers = document.get("allowed_providers")
        self.allowed_providers: tuple[str, ...] | None = (
            tuple(str(p) for p in providers) if isinstance(providers, list) else None)
        self.require_shutdown_rule = document.get("require_shutdown_rule") is True
        #: `"ceilings": "none"`: no money ceiling applies, on purpose (with a reason)
        self.ceilings_none = document.get("ceilings") == "none"
        limits = _section(HealthLimits, document)
        #: GB left free beyond the model files; the hottest a GPU may run, in C
        self.disk_margin_gb, self.temperature_max_c = limits.disk_margin_gb, limits.temperature_max_c

    @property
    def cost_tolerance(self) -> tuple[float, float]:
        return self.tolerance.abs_usd, self.tolerance.rel

    @property
    def sets_no_ceiling(self) -> bool:
        """Whether no money ceiling applies and the document does not say so on purpose."""
        return not self.ceilings_none and all(getattr(self.ceilings, name) is None for name in MONEY_CEILINGS)

    def max_attempts(self, what: str) -> int:
        """The retry count of `retry.<what>` (max_job_attempts, max_api_attempts, max_launch_attempts)."""
        return int(getattr(self.retry, what))

    def evaluate(self, action: Action) -> Decision:
        """Check an action against every ceiling that applies; the first breach denies."""
        checked: list[str] = []

        def limit(name: str) -> float | None:
            value: float | None = getattr(self.ceilings, name)
            if value is not None:
                checked.append(name)
            return value

        allowed_providers = self.allowed_providers
        if action.provider is not None and allowed_providers is not None:
            checked.append("allowed_providers")
            if action.provider not in allowed_providers:
                return Decision(False, "allowed_providers", None, None,
                                f"provider {action.provider!r} is not in allowed_providers "
                                f"{list(allowed_providers)}", tuple(checked))
        if action.kind == "launch":
            if self.require_shutdown_rule and not action.has_shutdown_rule:
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
            if exceeds(count, cap):
                return Decision(False, "max_concurrent_deployments", cap, count,
                                f"{count} live deployments > max_concurrent_deployments {cap:g}",
                                tuple(checked))
            cap = limit("max_idle_minutes")
            if action.idle_minutes is not None and exceeds(action.idle_minutes, cap):
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
