"""The spend chart: a base64 PNG str (never bytes), daily spend stacked by provider, the daily ceiling drawn."""

from __future__ import annotations

import base64
import struct

from gpuharness.audit.spend_chart import daily_spend_png

SPEND = {"2026-11-01|runpod": 1.5, "2026-11-01|vast": 0.5, "2026-11-02|vast": 3.0, "2026-11-03|massed": 0.2}


def png_size(encoded: str) -> tuple[int, int]:
    data = base64.b64decode(encoded, validate=True)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_chart_is_a_base64_png_str_for_self_contained_reports():
    chart = daily_spend_png(SPEND, 2.5, title="t")
    assert isinstance(chart, str)
    assert png_size(chart) == (1000, 420)


def test_chart_draws_the_ceiling_and_each_provider():
    plain = daily_spend_png(SPEND, None, title="t")
    with_ceiling = daily_spend_png(SPEND, 2.5, title="t")
    fewer_providers = daily_spend_png({k: v for k, v in SPEND.items() if "vast" not in k}, None, title="t")
    assert len({plain, with_ceiling, fewer_providers}) == 3


def test_chart_of_an_empty_ledger_still_renders():
    assert png_size(daily_spend_png({}, 10.0, title="no jobs yet")) == (1000, 420)


def test_chart_stacks_a_days_parts_in_the_given_order():
    days = {"2026-11-01|used (jobs)": 0.4, "2026-11-01|idle (billed, no job)": 9.0}
    used_first = daily_spend_png(days, 10.0, title="t", order=("used (jobs)", "idle (billed, no job)"))
    idle_first = daily_spend_png(days, 10.0, title="t", order=("idle (billed, no job)", "used (jobs)"))
    assert used_first != idle_first
