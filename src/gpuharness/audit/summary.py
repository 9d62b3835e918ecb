"""The audit's spend summary: small, JSON-able (it travels from xdist workers), and rendered as HTML."""

from __future__ import annotations

import html
from typing import Any

from gpuharness.audit.run import AuditRun
from gpuharness.core.clock import format_ts
from gpuharness.core.deployment import live_burn
from gpuharness.core.policy import Ceilings, exceeds
from gpuharness.core.spend import group_book

#: The chart's two parts of each day's billed spend, stacked in this order.
USED = "used (jobs)"
IDLE = "idle (billed, no job)"


def summarize(run: AuditRun) -> dict[str, Any]:
    """What the report shows: billed, used and idle spend by day, month, provider, GPU and deployment (the billed
    intervals of core.billing beside the jobs), and the verdict."""
    deployments = {d.id: {"provider": d.provider, "gpu": d.gpu, "status": d.status, "cost_hr": d.cost_hr}
                   for d in run.deployments()}
    burn, live = live_burn(run.deployments())
    grouped = {by: {key: spent.to_json() for key, spent in group_book(run.book, by).items()}
               for by in ("day", "month", "provider", "gpu", "deployment")}
    return {
        "registry": str(run.root),
        "as_of": format_ts(run.now),
        "ledger_lines": run.state.line_count,
        "lines_validated": run.lines_validated,
        "incremental": run.incremental,
        "anchor": run.anchor,
        "jobs": run.state.job_count,
        "policy": run.policy.ceilings.to_json(),
        **grouped,
        "day_use": day_use(grouped["day"]),
        "deployments": deployments,
        "live_burn_hr": round(burn, 6),
        "live_deployments": live,
        "problems": run.problem_counts(),
        "spend": _totals(grouped["deployment"]),
        "lowered_costs": [{"line": item.lineno, "job": item.job_id, "from_usd": item.before_usd,
                           "to_usd": item.after_usd, "reason": item.reason or None, "digest": item.digest or None}
                          for item in run.state.lowered],
    }


def _totals(deployments: dict[str, dict[str, float]]) -> dict[str, Any]:
    """Billed, used and idle in total and per deployment: the line under the verdict."""
    total = {part: round(sum(spent[part] for spent in deployments.values()), 6) for part in ("billed", "used", "idle")}
    return {**total, "deployments": deployments}


def day_use(days: dict[str, dict[str, float]]) -> dict[str, float]:
    """What the chart stacks: each day's used and idle spend, as `day|part` (idle below zero, jobs billed outside
    their deployment's intervals, is drawn as none)."""
    out: dict[str, float] = {}
    for day, spent in days.items():
        out[f"{day}|{USED}"] = spent["used"]
        out[f"{day}|{IDLE}"] = max(0.0, spent["idle"])
    return out


def _table(title: str, header: tuple[str, ...], rows: list[tuple[Any, ...]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return (f"<h3>{html.escape(title)}</h3><table class='gh-spend'><thead><tr>{head}</tr></thead>"
            f"<tbody>{body}</tbody></table>")


def _usd(value: float) -> str:
    """Dollars to the cent's hundredth, or to the micro-dollar below a cent (a demo's seconds of GPU time)."""
    return f"${value:,.4f}" if abs(value) >= 0.01 or not value else f"${value:,.6f}"


def _spend_line(spend: dict[str, Any]) -> str:
    """Billed, used and idle, first under the verdict: what the GPUs cost against what the jobs used."""
    if "unavailable" in spend:
        return (f"<p class='gh-spend-total'>Billed, used and idle: unavailable ({html.escape(spend['unavailable'])})"
                "</p>")
    if not spend:
        return ""
    billed, used, idle = spend["billed"], spend["used"], spend["idle"]
    share = f", {idle / billed:.0%} of billed" if billed else ""
    return (f"<p class='gh-spend-total' style='font-size:1.1em'><b>Billed {_usd(billed)}</b> (GPU time from launch to "
            f"a verified stop or destroy), <b>used {_usd(used)}</b> (the jobs' current ledger lines), <b>idle "
            f"{_usd(idle)}</b> (billed, not used{share}). <code>gpuharness spend --by deployment</code> splits it."
            "</p>")


def to_html(summary: dict[str, Any], chart_png_b64: str | None) -> str:
    """The summary block placed at the top of the audit report."""
    ceilings = Ceilings.from_document(summary["policy"])
    problems: dict[str, int] = summary["problems"]
    total = sum(spent["billed"] for spent in summary["provider"].values())
    idle = sum(spent["idle"] for spent in summary["provider"].values())
    over = sorted(d for d, spent in summary["day"].items() if exceeds(spent["billed"], ceilings.daily_usd))
    if problems:
        verdict = (f"<p class='gh-verdict' style='color:#b00020;font-weight:bold'>Audit found "
                   f"{sum(problems.values())} problem(s): "
                   + html.escape(", ".join(f"{r} ×{c}" for r, c in problems.items())) + "</p>")
    else:
        verdict = "<p class='gh-verdict' style='color:#1b5e20;font-weight:bold'>No leak found: every check passed.</p>"
    facts = _spend_line(summary.get("spend") or {})
    facts += (f"<p>Registry <code>{html.escape(summary['registry'])}</code> as of {html.escape(summary['as_of'])}: "
             f"{summary['ledger_lines']:,} ledger lines ({summary['lines_validated']:,} validated in this run, "
             f"{'incremental from the checkpoint' if summary['incremental'] else 'full pass'}), "
             f"{summary['jobs']:,} jobs, total billed ${total:,.2f} (idle ${idle:,.2f}: uptime no job used). Live burn "
             f"${summary['live_burn_hr']:,.2f}/hr on "
             f"{summary['live_deployments']} live deployment(s) (max_cost_hr {ceilings.max_cost_hr}, "
             f"max_concurrent_deployments {ceilings.max_concurrent_deployments}). Days over daily_usd: "
             f"{html.escape(', '.join(over)) if over else 'none'}. Checkpoint anchor: "
             f"{html.escape(str(summary.get('anchor', 'none: unanchored')))}.</p>")
    chart = (f"<img alt='daily billed spend stacked as used and idle, with the daily ceiling' style='max-width:100%' "
             f"src='data:image/png;base64,{chart_png_b64}'/>" if chart_png_b64 else "")
    return ("<div class='gh-audit-summary'><h2>gpuharness audit: spend at a glance</h2>" + verdict + facts + chart
            + "".join(_tables(summary, total)) + "</div>")


def _tables(summary: dict[str, Any], total: float) -> list[str]:
    """Billed, used and idle spend by month, provider, GPU and deployment (the largest billed first)."""
    monthly = Ceilings.from_document(summary["policy"]).monthly_usd
    deployments = summary["deployments"]

    def money(spent: dict[str, float]) -> tuple[str, str, str]:
        return f"{spent['billed']:,.4f}", f"{spent['used']:,.4f}", f"{spent['idle']:,.4f}"

    def by_billed(grouping: str) -> list[tuple[str, dict[str, float]]]:
        return sorted(summary[grouping].items(), key=lambda kv: -kv[1]["billed"])

    return [
        _table("Spend by month (UTC)", ("month", "billed USD", "used USD", "idle USD", "monthly_usd"),
               [(m, *money(v), monthly) for m, v in summary["month"].items()]),
        _table("Spend by provider", ("provider", "billed USD", "used USD", "idle USD", "share"),
               [(p, *money(v), f"{v['billed'] / total:.1%}" if total else "-") for p, v in by_billed("provider")]),
        _table("Spend by GPU", ("gpu", "billed USD", "used USD", "idle USD"),
               [(g, *money(v)) for g, v in by_billed("gpu")]),
        _table("Spend by deployment", ("deployment", "provider", "gpu", "status", "cost_hr", "billed USD",
                                       "used USD", "idle USD"),
               [(d, deployments.get(d, {}).get("provider", "?"), deployments.get(d, {}).get("gpu", "?"),
                 deployments.get(d, {}).get("status", "not in deployments.json"),
                 deployments.get(d, {}).get("cost_hr", "?"), *money(v)) for d, v in by_billed("deployment")]),
        _lowered_table(summary.get("lowered_costs", [])),
    ]


def _lowered_table(lowered: list[dict[str, Any]]) -> str:
    """Every correction that lowered a job's cost, with its reason and the digest of the line it corrects."""
    return _table(f"Lowered costs: {len(lowered)} correction(s) that lowered a job's cost",
                  ("line", "job", "from USD", "to USD", "reason", "digest of the corrected line"),
                  [(f"jobs.jsonl:{item['line']}", item["job"], f"{item['from_usd']:,.4f}", f"{item['to_usd']:,.4f}",
                    item["reason"] or "(none: a finding)", item["digest"] or "(none: a finding)")
                   for item in lowered])
