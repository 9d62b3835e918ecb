"""The audit's spend summary: small, JSON-able (it travels from xdist workers), and rendered as HTML."""

from __future__ import annotations

import html
from typing import Any

from gpuharness.audit.run import AuditRun
from gpuharness.core.clock import format_ts
from gpuharness.core.deployment import live_burn
from gpuharness.core.policy import exceeds

CEILINGS = ("per_job_usd", "daily_usd", "monthly_usd", "max_cost_hr", "max_concurrent_deployments",
            "max_idle_minutes")


def summarize(run: AuditRun) -> dict[str, Any]:
    """What the report shows: spend by day and provider, by provider, GPU and deployment, and the verdict."""
    state = run.state
    deployments = {d.id: {"provider": d.provider, "gpu": d.gpu, "status": d.status, "cost_hr": d.cost_hr}
                   for d in run.deployments()}
    burn, live = live_burn(run.deployments())
    return {
        "registry": str(run.root),
        "as_of": format_ts(run.now),
        "ledger_lines": state.line_count,
        "lines_validated": run.lines_validated,
        "incremental": run.incremental,
        "anchor": run.anchor,
        "jobs": state.job_count,
        "policy": {k: run.policy.get(k) for k in CEILINGS},
        "day_provider": state.rounded("day_provider"),
        "month": state.rounded("month"),
        "provider": state.rounded("provider"),
        "gpu": state.rounded("gpu"),
        "deployment": state.rounded("deployment"),
        "deployments": deployments,
        "live_burn_hr": round(burn, 6),
        "live_deployments": live,
        "problems": run.problem_counts(),
        "lowered_costs": [{"line": item.lineno, "job": item.job_id, "from_usd": item.before_usd,
                           "to_usd": item.after_usd, "reason": item.reason or None, "digest": item.digest or None}
                          for item in state.lowered],
    }


def _table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return (f"<h3>{html.escape(title)}</h3><table class='gh-spend'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def to_html(summary: dict[str, Any], chart_png_b64: str | None) -> str:
    """The summary block placed at the top of the audit report."""
    policy = summary["policy"]
    problems: dict[str, int] = summary["problems"]
    total = sum(summary["provider"].values())
    days = summary["day_provider"]
    by_day: dict[str, float] = {}
    for key, spent in days.items():
        day = key.partition("|")[0]
        by_day[day] = by_day.get(day, 0.0) + spent
    daily = policy.get("daily_usd")
    over = sorted(d for d, s in by_day.items() if exceeds(s, daily))
    if problems:
        verdict = (f"<p class='gh-verdict' style='color:#b00020;font-weight:bold'>Audit found "
                   f"{sum(problems.values())} problem(s): "
                   + html.escape(", ".join(f"{r} ×{c}" for r, c in problems.items())) + "</p>")
    else:
        verdict = "<p class='gh-verdict' style='color:#1b5e20;font-weight:bold'>No leak found: every check passed.</p>"
    facts = (f"<p>Registry <code>{html.escape(summary['registry'])}</code> as of {html.escape(summary['as_of'])}: "
             f"{summary['ledger_lines']:,} ledger lines ({summary['lines_validated']:,} validated in this run, "
             f"{'incremental from the checkpoint' if summary['incremental'] else 'full pass'}), "
             f"{summary['jobs']:,} jobs, total billed ${total:,.2f}. Live burn ${summary['live_burn_hr']:,.2f}/hr on "
             f"{summary['live_deployments']} live deployment(s) (max_cost_hr {policy.get('max_cost_hr')}, "
             f"max_concurrent_deployments {policy.get('max_concurrent_deployments')}). Days over daily_usd: "
             f"{html.escape(', '.join(over)) if over else 'none'}. Checkpoint anchor: "
             f"{html.escape(str(summary.get('anchor', 'none: unanchored')))}.</p>")
    chart = (f"<img alt='daily spend stacked by provider, with the daily ceiling' style='max-width:100%' "
             f"src='data:image/png;base64,{chart_png_b64}'/>" if chart_png_b64 else "")
    deployments = summary["deployments"]
    tables = [
        _table("Spend by month (UTC)", ("month", "USD", "monthly_usd"),
               [(m, f"{v:,.4f}", policy.get("monthly_usd")) for m, v in summary["month"].items()]),
        _table("Spend by provider", ("provider", "USD", "share"),
               [(p, f"{v:,.4f}", f"{v / total:.1%}" if total else "-")
                for p, v in sorted(summary["provider"].items(), key=lambda kv: -kv[1])]),
        _table("Spend by GPU", ("gpu", "USD"),
               [(g, f"{v:,.4f}") for g, v in sorted(summary["gpu"].items(), key=lambda kv: -kv[1])]),
        _table("Spend by deployment", ("deployment", "provider", "gpu", "status", "cost_hr", "USD"),
               [(d, deployments.get(d, {}).get("provider", "?"), deployments.get(d, {}).get("gpu", "?"),
                 deployments.get(d, {}).get("status", "not in deployments.json"),
                 deployments.get(d, {}).get("cost_hr", "?"), f"{v:,.4f}")
                for d, v in sorted(summary["deployment"].items(), key=lambda kv: -kv[1])]),
    ]
    lowered = summary.get("lowered_costs", [])
    tables.append(_table(f"Lowered costs: {len(lowered)} correction(s) that lowered a job's cost",
                         ("line", "job", "from USD", "to USD", "reason", "digest of the corrected line"),
                         [(f"jobs.jsonl:{item['line']}", item["job"], f"{item['from_usd']:,.4f}",
                           f"{item['to_usd']:,.4f}", item["reason"] or "(none: a finding)",
                           item["digest"] or "(none: a finding)") for item in lowered]))
    return ("<div class='gh-audit-summary'><h2>gpuharness audit: spend at a glance</h2>" + verdict + facts + chart
            + "".join(tables) + "</div>")
