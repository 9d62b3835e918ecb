"""`gpuharness status`: the registry as a table (rich) with a header, whole names and totals, the live burn and
today's billed spend against daily_usd. A rate in brackets is not billing now (stopped, destroyed). Destroyed
deployments are hidden unless --all; --json is unchanged."""

from __future__ import annotations

import io
from typing import Any

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gpuharness.audit.billed import registry_intervals
from gpuharness.core.clock import now_ts, utcnow
from gpuharness.core.deployment import Deployment, live_burn
from gpuharness.core.job_line import JobLine
from gpuharness.core.ledger import Ledger
from gpuharness.core.policy import Policy, against
from gpuharness.core.registry import Registry
from gpuharness.core.spend import billed_today_and_month, spend_book
from gpuharness.core.terminal import escape
from gpuharness.core.terminal import shown as redacted
from gpuharness.health.gate import next_step
from gpuharness.operations.guard_stop import notes_of
from gpuharness.operations.rate_changes import last_rate_changes, rate_note

COLUMNS = ("id", "provider", "instance", "gpu", "status", "$/hr", "created", "shutdown rule", "note")


def rule_text(deployment: Deployment) -> str:
    rule = deployment.shutdown_rule
    if rule is None:
        return "-"
    parts = [f"idle {rule.idle_minutes:g} min" if rule.idle_minutes is not None else "",
             f"max {rule.max_hours:g} h" if rule.max_hours is not None else "",
             f"until {rule.deadline}" if rule.deadline else ""]
    return ", ".join(p for p in parts if p) or "-"


def row(deployment: Deployment, note: str = "") -> tuple[str, ...]:
    gpu = deployment.gpu or "-"
    if deployment.gpu_count and deployment.gpu_count > 1:
        gpu = f"{deployment.gpu_count}x {gpu}"
    rate = f"{deployment.cost_hr:.3f}" if deployment.bills else f"({deployment.cost_hr:.3f})"
    return (deployment.id, deployment.provider, deployment.instance_id or "-", gpu, deployment.status, rate,
            deployment.created_at[:16] or "-", rule_text(deployment), note)


def billed_today(registry: Registry) -> float:
    lines = ([JobLine.from_record(r) for r in Ledger(registry.ledger_path).checked_records()]
             if registry.ledger_path.exists() else [])
    today, _ = billed_today_and_month(spend_book(lines, registry_intervals(registry, utcnow())), now_ts())
    return today


def render(registry: Registry, *, show_all: bool) -> str:
    deployments = registry.deployments()
    shown = [d for d in deployments if show_all or d.status != "destroyed"]
    hidden = len(deployments) - len(shown)
    table = Table(*COLUMNS, box=box.SIMPLE_HEAD, show_footer=False)
    for column in table.columns:
        column.no_wrap = True  # whole names, never "NVIDIA GeForce RTX 409"
    changes, ceiling = last_rate_changes(registry), Policy(registry.policy_document()).ceilings.max_cost_hr
    guards = notes_of(registry, shown)
    for deployment in shown:
        note = rate_note(deployment, changes.get(deployment.id), ceiling).strip() or guards.get(deployment.id, "")
        table.add_row(*(Text(escape(cell)) for cell in row(deployment, note)))  # text from outside: no markup
    burn, live = live_burn(deployments)
    daily = Policy(registry.policy_document()).ceilings.daily_usd
    of_daily = against("daily_usd", daily)
    out = io.StringIO()
    console = Console(file=out, width=400, color_system=None, force_terminal=False, highlight=False)
    if shown:
        console.print(table)
    else:
        console.print("(no deployments)" if not deployments else "(no live deployments)")
    console.print(f"live burn ${burn:,.3f}/hr on {live} billing deployment(s); today ${billed_today(registry):,.2f} "
                  f"billed{of_daily}" + (f"; {hidden} destroyed hidden (--all shows them)" if hidden else ""))
    for deployment in shown:  # where one is not ready, the command that moves it on
        if deployment.status not in ("ready", "destroyed"):
            console.print(Text(redacted(f"next for {deployment.id}: {next_step(deployment)}")))
    return "\n".join(line.rstrip() for line in out.getvalue().splitlines()).strip("\n")


def payload(registry: Registry) -> dict[str, Any]:
    return {"deployments": [d.to_json() for d in registry.deployments()]}
