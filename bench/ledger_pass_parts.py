"""Where a full audit's ledger time goes, per line, against DuckDB's bare sum over the same file.

    python bench/ledger_pass_parts.py [--lines 200000] [--repeat 3]

In one run it generates a ledger (fixtures/make_demo.py), then times, fastest of `--repeat`, each stage of the
ledger pass on its own over the whole file: splitting 4 MB blocks into lines, msgspec decoding into `JobLine`, the
timestamp checks, the job rules (`LedgerPass.follow`), the secret scan, the prefix hash (BLAKE3, in the pass it
runs in a thread beside the rest), the whole pass, and DuckDB's `SELECT sum(cost_usd)` over the same file.
"""

from __future__ import annotations

import argparse
import gc
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "fixtures"))

import make_demo  # noqa: E402

from gpuharness.audit import checkpoint  # noqa: E402
from gpuharness.audit.ledger_pass import BLOCK, LedgerPass, PassContext, hash_range, scan  # noqa: E402
from gpuharness.core.job_line import decode_job_line  # noqa: E402
from gpuharness.core.secrets import find_secrets  # noqa: E402


def fastest(repeat: int, work: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        work()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gh-parts-"))
    try:
        make_demo.build(work, lines=args.lines)
        path = work / "jobs.jsonl"
        data = path.read_bytes()
        blocks: list[bytes] = []
        position = 0
        while position < len(data):
            end = data.rfind(b"\n", position, position + BLOCK) + 1
            blocks.append(data[position:end])
            position = end
        raws = [raw for block in blocks for raw in block.split(b"\n")[:-1]]
        lines = [decode_job_line(raw) for raw in raws]
        ctx = PassContext(str(path), {}, 0.01, 0.02)
        gc.disable()

        def follow() -> None:
            rules = LedgerPass(ctx, None)
            for number, line in enumerate(lines, 1):
                rules.follow(number, line)

        figures = {
            "split into lines": fastest(args.repeat, lambda: [b.split(b"\n") for b in blocks]),
            "msgspec decode (JobLine)": fastest(args.repeat, lambda: [decode_job_line(r) for r in raws]),
            "timestamp checks": fastest(args.repeat, lambda: [line.times_valid() for line in lines]),
            "job rules (follow)": fastest(args.repeat, follow),
            "secret scan": fastest(args.repeat, lambda: [list(find_secrets(b)) for b in blocks]),
            "prefix hash (blake3)": fastest(args.repeat, lambda: hash_range(
                path, 0, len(data), checkpoint.PREFIX_HASHES["blake3"]())),
            "whole pass (scan)": fastest(args.repeat, lambda: scan(ctx, 0, len(data))),
        }
        gc.enable()
        import duckdb

        figures["duckdb sum(cost_usd)"] = fastest(args.repeat, lambda: duckdb.sql(
            f"SELECT sum(cost_usd) FROM read_ndjson_auto('{path}')").fetchall())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    count = len(raws)
    duck = figures["duckdb sum(cost_usd)"]
    print(f"{count:,} lines, {len(data) / 1e6:,.0f} MB")
    for name, seconds in figures.items():
        print(f"  {name:26} {seconds:7.3f} s  {seconds / count * 1e6:6.2f} µs/line  {seconds / duck:5.2f}x DuckDB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
