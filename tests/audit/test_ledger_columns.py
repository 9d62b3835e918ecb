"""The columnar scan (audit/ledger_columns.py) makes exactly what the line-by-line pass makes of a ledger where the
rules find nothing, and gives way (None) wherever the pass finds something or the two might read a line differently:
on the demo ledger, on ledgers with each kind of trouble, and on generated ledgers (those of test_ledger_split)."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from test_ledger_split import DEMO_LINES, RATES, TOKEN, ledgers, verdict

from gpuharness.audit.ledger_columns import columnar_scan
from gpuharness.audit.ledger_pass import PassContext, PassResult, scan


def both(tmp: Path, data: bytes) -> tuple[PassResult | None, PassResult]:
    """(the columnar scan's result or None, the line-by-line pass's) over a ledger holding `data`."""
    tmp.mkdir(parents=True, exist_ok=True)
    path = tmp / "jobs.jsonl"
    path.write_bytes(data)
    ctx = PassContext(str(path), RATES, 0.01, 0.02, 1.0)
    fast = columnar_scan(ctx, len(data), tmp / "columnar.jsonl", min_bytes=0)
    return fast, scan(ctx, 0, len(data), None, tmp / "reference.jsonl")


def agree(fast: PassResult | None, reference: PassResult) -> None:
    if fast is not None:
        assert not reference.counts, "the columnar scan vouched for a ledger the pass finds something in"
        assert verdict(fast, fast.jobs_files) == verdict(reference, reference.jobs_files)


def test_the_demo_ledger_reads_the_same(tmp_path: Path) -> None:
    fast, reference = both(tmp_path, b"\n".join(DEMO_LINES) + b"\n")
    assert fast is not None, "the columnar scan gave way on a clean ledger"
    agree(fast, reference)
    assert Path(fast.jobs_files[0]).read_bytes() == Path(reference.jobs_files[0]).read_bytes()


@pytest.mark.parametrize("change", [
    {"status": "failed"}, {"cost_usd": 9.5}, {"duration_s": 99999.0}, {"deployment_id": "dep_unknown"},
    {"correction": True}, {"cost_usd": "0.1"}, {"status": "done"}, {"note": "an unknown field"},
    {"inputs": {"prompt": "Bearer " + TOKEN}}, {"ts": "2026-11-01T09:05:28Z"}, {"provider": None},
    {"started_at": "2026-11-30T18:00:00.000Z"}])
def test_it_gives_way_on_trouble(tmp_path: Path, change: dict[str, object]) -> None:
    clean = list(DEMO_LINES[:300])
    at = next(i for i, line in enumerate(clean) if i >= 120 and b'"status":"completed"' in line)
    clean[at] = orjson.dumps(dict(orjson.loads(clean[at]), **change))
    fast, reference = both(tmp_path, b"\n".join(clean) + b"\n")
    assert fast is None
    agree(fast, reference)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=ledgers())
def test_generated_ledgers_read_the_same(tmp_path: Path, data: bytes) -> None:
    fast, reference = both(tmp_path / str(abs(hash(data))), data)
    agree(fast, reference)
