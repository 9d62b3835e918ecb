"""The spend chart of the audit report: daily spend stacked by provider, with the daily ceiling as a line."""

from __future__ import annotations

import base64
import io
from collections import defaultdict


def daily_spend_png(day_provider: dict[str, float], daily_ceiling: float | None, *, title: str) -> str:
    """Render the chart as a base64-encoded PNG **str** (pytest-html's self-contained mode needs str, not bytes).

    day_provider maps "YYYY-MM-DD|provider" to that day's billed spend.
    """
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    by_provider: dict[str, dict[str, float]] = defaultdict(dict)
    for key, spent in day_provider.items():
        day, _, provider = key.partition("|")
        by_provider[provider][day] = spent
    days = sorted({key.partition("|")[0] for key in day_provider})
    figure = Figure(figsize=(10, 4.2), dpi=100)
    axes = figure.add_subplot()
    bottoms = [0.0] * len(days)
    positions = list(range(len(days)))
    for provider in sorted(by_provider):
        heights = [by_provider[provider].get(day, 0.0) for day in days]
        axes.bar(positions, heights, bottom=bottoms, label=provider, width=0.8)
        bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    if daily_ceiling is not None:
        axes.axhline(daily_ceiling, color="crimson", linestyle="--", linewidth=1.5,
                     label=f"daily_usd ceiling ${daily_ceiling:,.2f}")
        over = [p for p, total in zip(positions, bottoms, strict=True) if total > daily_ceiling + 1e-9]
        if over:
            axes.scatter(over, [bottoms[p] for p in over], marker="v", color="crimson", zorder=3,
                         label="over the ceiling")
    step = max(1, len(days) // 15)
    axes.set_xticks(positions[::step], [d[5:] for d in days[::step]], rotation=45, ha="right")
    axes.set_ylabel("USD (UTC day)")
    axes.set_title(title)
    axes.grid(axis="y", alpha=0.3)
    if days:
        axes.legend(loc="upper left", fontsize="small")
    else:
        axes.text(0.5, 0.5, "no billed jobs", ha="center", va="center", transform=axes.transAxes)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    return base64.b64encode(buffer.getvalue()).decode("ascii")
