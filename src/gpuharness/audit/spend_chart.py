"""The spend chart of the audit report: daily spend stacked by provider, with the daily ceiling as a line."""

from __future__ import annotations

import base64
import io
import multiprocessing
from collections import defaultdict
from typing import Any


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


ChartArgs = tuple[dict[str, float], float | None, str]


def _serve(connection: Any) -> None:
    """The helper process: import matplotlib now, render the one chart asked for, send it back."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        from matplotlib.backends import backend_agg  # noqa: F401
        from matplotlib.figure import Figure  # noqa: F401

        day_provider, ceiling, title = connection.recv()
        connection.send(daily_spend_png(day_provider, ceiling, title=title))
    except (EOFError, OSError, KeyboardInterrupt):
        pass
    finally:
        connection.close()


class ChartRenderer:
    """Renders the chart in a helper forked early, so that matplotlib's import overlaps
    pytest's start-up on another core. Falls back to rendering in-process when the helper is not there."""

    __slots__ = ("_args", "_connection", "_process")

    def __init__(self, *, helper: bool = True) -> None:
        self._args: ChartArgs | None = None
        self._connection: Any = None
        self._process: Any = None
        if not helper:
            return
        try:
            context = multiprocessing.get_context("fork")
        except ValueError:
            return
        parent, child = context.Pipe()
        process = context.Process(target=_serve, args=(child,), daemon=True, name="gpuharness-chart")
        process.start()
        child.close()
        self._connection, self._process = parent, process

    @classmethod
    def inline(cls) -> ChartRenderer:
        """A renderer without a helper process."""
        return cls(helper=False)

    def submit(self, day_provider: dict[str, float], ceiling: float | None, *, title: str) -> None:
        """Start rendering (once)."""
        if self._args is not None:
            return
        self._args = (day_provider, ceiling, title)
        if self._connection is not None:
            try:
                self._connection.send(self._args)
            except OSError:
                self._connection = None

    def result(self, timeout: float = 60.0) -> str:
        """The base64 PNG of the submitted chart."""
        if self._args is None:
            raise RuntimeError("no chart was submitted")
        if self._connection is not None:
            try:
                if self._connection.poll(timeout):
                    value = self._connection.recv()
                    if isinstance(value, str):
                        return value
            except (EOFError, OSError):
                pass
        day_provider, ceiling, title = self._args
        return daily_spend_png(day_provider, ceiling, title=title)

    def close(self) -> None:
        """Stop the helper if it is still there. Its chart is either delivered or no longer wanted (a session
        that rendered no report, e.g. --collect-only), so it is not waited for: it holds nothing to save."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        if self._process is not None:
            if self._process.is_alive():
                self._process.terminate()
            self._process.join(timeout=2)
            self._process = None
