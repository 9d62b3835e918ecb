"""Keep-alive versus destroy: the arithmetic of the gpu-ops runbook."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from gpuharness.core.json_fields import JsonFields


@final
@dataclass(frozen=True, slots=True)
class KeepAliveDecision(JsonFields):
    """The decision and every number behind it."""

    decision: str  # "keep-alive" or "destroy"
    cost_hr: float
    gap_minutes: float
    startup_minutes: float
    jobs: int
    avg_job_minutes: float
    gap_cost: float
    startup_cost: float
    restart_cost: float
    total_runtime_minutes: float
    breakeven_gap_minutes: float
    interruptible_advice: str

    def explain(self) -> str:
        """The arithmetic, as lines a person can check."""
        return "\n".join([
            f"total_runtime = N × avg_job_time = {self.jobs} × {self.avg_job_minutes:g} min"
            f" = {self.total_runtime_minutes:g} min",
            f"startup_cost  = startup_minutes/60 × cost_hr = {self.startup_minutes:g}/60 × ${self.cost_hr:g}"
            f" = ${self.startup_cost:.4f}",
            f"restart_cost  = (N − 1) × startup_cost = {max(self.jobs - 1, 0)} × ${self.startup_cost:.4f}"
            f" = ${self.restart_cost:.4f}",
            f"gap_cost      = gap_minutes/60 × cost_hr = {self.gap_minutes:g}/60 × ${self.cost_hr:g}"
            f" = ${self.gap_cost:.4f}",
            f"break-even gap = startup_minutes = {self.breakeven_gap_minutes:g} min",
            f"decision: {self.decision} (idle gap ${self.gap_cost:.4f} "
            f"{'<' if self.decision == 'keep-alive' else '>='} one restart ${self.startup_cost:.4f})",
            self.interruptible_advice,
        ])


def keep_alive(*, cost_hr: float, gap_minutes: float, startup_minutes: float, jobs: int = 2,
               avg_job_minutes: float = 0.0, retryable: bool = False) -> KeepAliveDecision:
    """Keep alive when the idle gap between jobs costs less than restarting for the next job."""
    if cost_hr < 0 or gap_minutes < 0 or startup_minutes < 0 or jobs < 1:
        raise ValueError("cost_hr, gap_minutes and startup_minutes must be >= 0 and jobs >= 1")
    startup_cost = startup_minutes / 60.0 * cost_hr
    restart_cost = (jobs - 1) * startup_cost
    gap_cost = gap_minutes / 60.0 * cost_hr
    decision = "keep-alive" if gap_cost < startup_cost else "destroy"
    advice = ("interruptible (spot/bid) pays here: the queue is retryable, so a preemption costs one "
              "restart, not lost work" if retryable else
              "interruptible (spot/bid) only pays for retryable queues; keep on-demand for this job")
    return KeepAliveDecision(decision, cost_hr, gap_minutes, startup_minutes, jobs, avg_job_minutes,
                             round(gap_cost, 6), round(startup_cost, 6), round(restart_cost, 6),
                             jobs * avg_job_minutes, startup_minutes, advice)
