"""The spend chart of the audit report: each day's billed spend stacked in parts (used and idle, or by provider),
with the daily ceiling as a line.

Drawn with Pillow's primitives (bars, lines, text in its built-in font): a plotting library's import would cost the
audit suite more than all its checks (see the README's benchmarks).
"""

from __future__ import annotations

import base64
import io
import math
from collections import defaultdict
from typing import Any, Final

from gpuharness.core.policy import exceeds

WIDTH: Final = 1000
HEIGHT: Final = 420
#: The plot area: left, top, right, bottom.
PLOT: Final = (78, 46, 984, 362)
#: matplotlib's default cycle (tab10), so that providers keep the colors earlier reports gave them.
COLORS: Final = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf")
CEILING_COLOR: Final = "#dc143c"
GRID_COLOR: Final = "#e4e4e4"
TEXT_COLOR: Final = "#222222"


def daily_spend_png(day_parts: dict[str, float], daily_ceiling: float | None, *, title: str,
                    order: tuple[str, ...] = ()) -> str:
    """Render the chart as a base64-encoded PNG **str** (pytest-html's self-contained mode needs str, not bytes).

    day_parts maps "YYYY-MM-DD|part" to that part of the day's billed spend (the audit's parts: used and idle); the
    parts stack from the bottom in `order`, then by name.
    """
    from PIL import Image, ImageDraw

    by_part: dict[str, dict[str, float]] = defaultdict(dict)
    for key, spent in day_parts.items():
        day, _, part = key.partition("|")
        by_part[part][day] = spent
    days = sorted({key.partition("|")[0] for key in day_parts})
    totals = [sum(by_part[p].get(day, 0.0) for p in by_part) for day in days]
    step, top = _scale(max([*totals, daily_ceiling or 0.0, 0.0]))
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    draw = ImageDraw.Draw(image)
    _frame(image, draw, days, step, top, title)
    legend = _bars(draw, days, by_part, top, order)
    if daily_ceiling is not None:
        legend += _ceiling(draw, days, totals, daily_ceiling, top)
    if days:
        _legend(draw, legend)
    else:
        left, upper, right, lower = PLOT
        draw.text(((left + right) / 2, (upper + lower) / 2), "nothing billed", fill=TEXT_COLOR, font=_font(16),
                  anchor="mm")
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


#: A legend entry: its label, and how its key is drawn ("box", "dash" or "marker") in which color.
LegendEntry = tuple[str, str, str]


def _font(size: int) -> Any:
    from PIL import ImageFont

    return ImageFont.load_default(size=size)


def _scale(highest: float) -> tuple[float, float]:
    """A round tick step (1, 2, 2.5 or 5 times a power of ten, about five ticks) and the axis top (a multiple)."""
    if highest <= 0:
        return 0.2, 1.0
    raw = highest / 5
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    return step, step * math.ceil(highest / step * (1 + 1e-9))


def _y(value: float, top: float) -> float:
    _, upper, _, lower = PLOT
    return lower - (lower - upper) * value / top


def _x(index: float, count: int) -> float:
    left, _, right, _ = PLOT
    return left + (right - left) * index / max(count, 1)


def _frame(image: Any, draw: Any, days: list[str], step: float, top: float, title: str) -> None:
    """Title, horizontal grid with USD labels, the axes' frame, day labels (about 15) and the y axis' name."""
    from PIL import Image, ImageDraw

    left, upper, right, lower = PLOT
    small = _font(12)
    draw.text((WIDTH / 2, 20), title, fill=TEXT_COLOR, font=_font(16), anchor="mm")
    ticks = round(top / step)
    for index in range(ticks + 1):
        value = step * index
        y = _y(value, top)
        if 0 < index:
            draw.line([(left, y), (right, y)], fill=GRID_COLOR, width=1)
        draw.text((left - 8, y), f"{value:,.10g}", fill=TEXT_COLOR, font=small, anchor="rm")
    draw.rectangle([left, upper, right, lower], outline="#444444", width=1)
    every = max(1, len(days) // 15)
    for index in range(0, len(days), every):
        x = _x(index + 0.5, len(days))
        draw.line([(x, lower), (x, lower + 4)], fill="#444444", width=1)
        draw.text((x, lower + 8), days[index][5:], fill=TEXT_COLOR, font=small, anchor="mt")
    name = "USD (UTC day)"
    box = draw.textbbox((0, 0), name, font=small)
    label = Image.new("RGB", (box[2] + 2, box[3] + 2), "white")
    ImageDraw.Draw(label).text((1, 1), name, fill=TEXT_COLOR, font=small)
    turned = label.rotate(90, expand=True)
    image.paste(turned, (14, int((upper + lower) / 2 - turned.height / 2)))


def _bars(draw: Any, days: list[str], by_part: dict[str, dict[str, float]], top: float,
          order: tuple[str, ...]) -> list[LegendEntry]:
    """Each day's bar, stacked by part (those in `order` first, then by name); the parts' legend entries."""
    bottoms = [0.0] * len(days)
    legend: list[LegendEntry] = []
    parts = [p for p in order if p in by_part] + sorted(p for p in by_part if p not in order)
    for number, part in enumerate(parts):
        color = COLORS[number % len(COLORS)]
        legend.append((part, "box", color))
        for index, day in enumerate(days):
            spent = by_part[part].get(day, 0.0)
            if spent > 0:
                draw.rectangle([_x(index + 0.1, len(days)), _y(bottoms[index] + spent, top),
                                _x(index + 0.9, len(days)), _y(bottoms[index], top)], fill=color)
            bottoms[index] += spent
    return legend


def _ceiling(draw: Any, days: list[str], totals: list[float], ceiling: float, top: float) -> list[LegendEntry]:
    """The ceiling as a dashed line, a marker over each day above it; their legend entries."""
    left, _, right, _ = PLOT
    y = _y(ceiling, top)
    for start in range(left, right, 13):
        draw.line([(start, y), (min(start + 8, right), y)], fill=CEILING_COLOR, width=2)
    legend = [(f"daily_usd ceiling ${ceiling:,.2f}", "dash", CEILING_COLOR)]
    over = [index for index, total in enumerate(totals) if exceeds(total, ceiling)]
    for index in over:
        x, tip = _x(index + 0.5, len(days)), _y(totals[index], top) - 3
        draw.polygon([(x - 6, tip - 10), (x + 6, tip - 10), (x, tip)], fill=CEILING_COLOR)
    if over:
        legend.append(("over the ceiling", "marker", CEILING_COLOR))
    return legend


def _legend(draw: Any, entries: list[LegendEntry]) -> None:
    """The legend in the plot's upper left corner."""
    left, upper, _, _ = PLOT
    font = _font(12)
    width = max(draw.textlength(label, font=font) for label, _, _ in entries) + 40
    draw.rectangle([left + 8, upper + 8, left + 8 + width, upper + 14 + 18 * len(entries)], fill="white",
                   outline="#cccccc")
    for row, (label, kind, color) in enumerate(entries):
        x, y = left + 16, upper + 20 + 18 * row
        if kind == "box":
            draw.rectangle([x, y - 5, x + 16, y + 5], fill=color)
        elif kind == "dash":
            draw.line([(x, y), (x + 16, y)], fill=color, width=2)
        else:
            draw.polygon([(x + 2, y - 5), (x + 14, y - 5), (x + 8, y + 5)], fill=color)
        draw.text((x + 24, y), label, fill=TEXT_COLOR, font=font, anchor="lm")
