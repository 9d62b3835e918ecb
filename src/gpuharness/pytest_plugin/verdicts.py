"""The verdicts at the top of a suite's HTML report, in its static HTML (readable without JavaScript): one row per
deployment for checks/health (READY or NOT READY, cause, remedy, the GPU's performance line)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from typing import Any

from gpuharness.core.secrets import clip
from gpuharness.core.terminal import shown
from gpuharness.health.readiness import CheckResult

#: characters a cell shows on the first screen; the whole text is its title (and in the checks' table below)
CELL = 110
STYLE = ("border-collapse:collapse;margin:8px 0;font-size:15px",
         "padding:4px 10px;border:1px solid #999;text-align:left")


def health_row(deployment_id: str, line: str, results: Mapping[str, CheckResult],
               figures: Mapping[str, Any] | None) -> tuple[str, str, str, str, str]:
    """(deployment, READY or NOT READY, cause, remedy, GPU line) from the gate's line and the checks' results."""
    ready = ": READY" in line or "checks pass on the recording" in line
    failed = [(name, result) for name, result in sorted(results.items()) if result.outcome == "failed"]
    cause = ", ".join(sorted({result.cause or name for name, result in failed}))
    remedy = failed[0][1].message if failed else ("" if ready else line.split(": ", 1)[-1])
    gpu = str(figures.get("message", "")) if figures else ""
    return deployment_id, "READY" if ready else "NOT READY", cause, remedy, gpu


def health_table(rows: list[tuple[str, str, str, str, str]]) -> str:
    """The verdict table, first in the report's summary."""
    table, cell = STYLE
    head = "".join(f'<th style="{cell}">{name}</th>' for name in ("deployment", "verdict", "cause", "remedy", "GPU"))
    body = []
    for row in rows:
        colour = "#1a7f37" if row[1] == "READY" else "#cf222e"
        cells = [f'<td style="{cell}" title="{escape(shown(value))}">{escape(clip(shown(value), CELL))}</td>'
                 for value in row]
        cells[1] = f'<td style="{cell};color:{colour};font-weight:bold">{escape(row[1])}</td>'
        body.append(f'<tr class="gpuharness-verdict">{"".join(cells)}</tr>')
    return (f'<h2 id="gpuharness-verdict">Verdict</h2><table style="{table}"><tr>{head}</tr>'
            f'{"".join(body)}</table>')
