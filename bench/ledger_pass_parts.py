"""Where a full audit's ledger time goes, per line, against DuckDB's bare sum over the same file.

    python bench/ledger_pass_parts.py [--lines 200000] [--repeat 3]

In one run it generates a ledger (fixtures/make_demo.py), then times, fastest of `--repeat`, each stage of the
ledger pass on its own over the whole file: msgspec decoding into `JobLine` one call per line and one call per
48 KB slice (what the pass does), the timestamp checks (with their caches filled, and from empty caches against the
two caches the pass had before), the job rules (`LedgerPass.follow_lines`), the secret scan, the whole pass in one
process (and with every line decoded on its own), the whole pass split over two processes (a forked child checks
the second half), the prefix hash (BLAKE3, in the pass it runs in a thread beside the rest), the columnar scan
(`audit.ledger_columns`: a forked child proves the lines with the Structs and DuckDB applies the rules as SQL while
this process scans for secrets; and its two stages on their own), DuckDB's `SELECT sum(cost_usd)` over the same
file, and, where pyarrow is installed (it is no dependency), pyarrow's typed JSON read of the file with the job
line's schema, an unexpected field refused: the one well-kept reader found that refuses a string where a number
belongs, a repeated key and an unknown field, and so a candidate for the bulk strict scan. Each stage shows its
wall time and its CPU time (user and system, threads and child processes included): on a machine shared with
other jobs the CPU time varies far less, and the two-process pass shows its cost in CPU and its critical path (the
busier of its two processes), which is its wall time on two idle cores.
"""

from __future__ import annotations

import argparse
import gc
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "fixtures"))

import make_demo  # noqa: E402

from gpuharness.audit import checkpoint, ledger_columns, ledger_pass, ledger_split  # noqa: E402
from gpuharness.audit.ledger_pass import (  # noqa: E402
    BLOCK,
    SLICE,
    LedgerPass,
    PassContext,
    RawLines,
    hash_range,
    scan,
)
from gpuharness.core import job_line  # noqa: E402
from gpuharness.core.job_line import decode_block, decode_job_line  # noqa: E402
from gpuharness.core.secrets import find_secrets  # noqa: E402


def cpu_now() -> float:
    """CPU seconds of this process (every thread) and of its waited-for children."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def fastest(repeat: int, work: Callable[[], object]) -> tuple[float, float]:
    """The least wall time and the least CPU time of `repeat` runs."""
    wall, cpu = float("inf"), float("inf")
    for _ in range(repeat):
        start, used = time.perf_counter(), cpu_now()
        work()
        wall, cpu = min(wall, time.perf_counter() - start), min(cpu, cpu_now() - used)
    return wall, cpu


def slices_of(blocks: list[bytes]) -> list[tuple[bytes, int, int, int]]:
    """(block, start, end, lines) of each slice, as the pass cuts them."""
    found = []
    for block in blocks:
        position = 0
        while position < len(block):
            cut = block.rfind(b"\n", position, position + SLICE) + 1 or block.index(b"\n", position) + 1
            found.append((block, position, cut, block.count(b"\n", position, cut)))
            position = cut
    return found


def split_pass(ctx: PassContext, size: int, work: Path) -> float:
    """The two-process pass; returns the CPU seconds of its busier process."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    child_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with open(ctx.path, "rb") as handle:  # the first line start after the middle, whatever the ledger's size
        handle.seek(size // 2)
        handle.readline()
        cut = handle.tell()
    child = ledger_split.TailChild.start(ctx, cut, size, work)
    if child is None:
        raise SystemExit("no child process could be forked (this process runs other threads)")
    ledger_split.scan_split(ctx, size, cut, child, work)
    after, child_after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    parent = after.ru_utime + after.ru_stime - own.ru_utime - own.ru_stime
    forked = child_after.ru_utime + child_after.ru_stime - child_before.ru_utime - child_before.ru_stime
    return max(parent, forked)


class GaveWay(Exception):
    """The columnar scan did not vouch for the generated (clean) ledger."""


def columnar_pass(ctx: PassContext, size: int, work: Path) -> None:
    """The columnar scan of the whole ledger; it must vouch for the generated (clean) ledger. On a big ledger it
    gives way when DuckDB's grouping outgrows the scan's memory limit (`ledger_columns.MEMORY_LIMIT`: about 100,000
    lines fit)."""
    if ledger_columns.columnar_scan(ctx, size, work / "columnar.jsonl", min_bytes=0) is None:
        raise GaveWay


def three_pieces(stamps: list[str]) -> None:
    """The timestamp checks of the pass from empty caches (hours, minute-seconds and tails)."""
    for cache in (job_line.HOURS, job_line.MINUTES, job_line.TAILS):
        cache.clear()
    for stamp in stamps:
        if not (stamp[:13] in job_line.HOURS and stamp[13:19] in job_line.MINUTES and stamp[19:] in job_line.TAILS):
            job_line.is_date_time(stamp)


def two_pieces(stamps: list[str]) -> None:
    """The same with the caches the pass had before: whole minutes (`YYYY-MM-DDTHH:MM`) and second tails."""
    heads: set[str] = set()
    tails: set[str] = set()
    valid = job_line._date_time_format().is_valid
    for stamp in stamps:
        if not (stamp[:16] in heads and stamp[16:] in tails) and valid(stamp):
            heads.add(stamp[:16])
            tails.add(stamp[16:])


def line_by_line(ctx: PassContext, size: int) -> None:
    """The one-process pass with every line decoded on its own (no slice decoded in one call)."""
    decode = ledger_pass.decode_block
    ledger_pass.decode_block = lambda *_: None  # type: ignore[assignment]
    try:
        scan(ctx, 0, size)
    finally:
        ledger_pass.decode_block = decode


def arrow_strict_read(path: Path) -> Callable[[], int] | None:
    """pyarrow's streaming JSON read of the ledger with the job line's fields typed and an unexpected field refused
    (the inputs' struct holds every input name of the file: a free-form object has no strict Arrow type); None where
    pyarrow is not installed."""
    try:
        import pyarrow as pa  # type: ignore[import-not-found]
        import pyarrow.json as pj  # type: ignore[import-not-found]
    except ImportError:
        return None
    text, number, count = pa.string(), pa.float64(), pa.int64()
    seen: dict[str, set[type]] = {}
    with path.open("rb") as file:
        for raw in file:
            for key, value in (orjson.loads(raw).get("inputs") or {}).items():
                seen.setdefault(key, set()).add(type(value))
    kinds = {str: text, bool: pa.bool_(), int: count, float: number}
    inputs = pa.struct([(key, number if float in types else kinds[types.pop()]) for key, types in seen.items()])
    artifact = pa.struct([("name", text), ("uri", text), ("remote_path", text), ("sha256", text), ("size", count),
                          ("synced_at", text), ("discarded", pa.bool_())])
    schema = pa.schema([
        ("id", text), ("deployment_id", text), ("status", text), ("ts", text), ("provider", text), ("model", text),
        ("workflow", text), ("workflow_version", count), ("inputs", inputs), ("started_at", text),
        ("completed_at", text), ("duration_s", number), ("cost_usd", number), ("gpu", text),
        ("artifacts", pa.list_(artifact)), ("error", text), ("cause", text), ("pid", count), ("host", text),
        ("attempt", count), ("correction", pa.bool_()), ("reason", text), ("digest", text)])
    options = pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error")

    def read() -> int:
        return sum(batch.num_rows for batch in pj.open_json(path, parse_options=options))

    return read


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="gh-parts-"))
    try:
        make_demo.build(work, lines=args.lines)
        path = work / "jobs.jsonl"
        rates = {d["id"]: float(d["cost_hr"]) for d in orjson.loads((work / "deployments.json").read_bytes())[
            "deployments"]}
        ctx = PassContext(str(path), rates, 0.01, 0.02, 5.0)
        (work / "split").mkdir()
        gc.disable()
        # The two-process pass first, while this process is small (a forked child shares its memory, and what either
        # writes to is copied), and before BLAKE3's thread pool exists (a process with other threads forks no child).
        critical = [float("inf")]
        size = path.stat().st_size
        split = fastest(args.repeat, lambda: critical.append(split_pass(ctx, size, work / "split")))
        # also forked, before DuckDB's threads exist in this process
        try:
            columnar: tuple[float, float] | None = fastest(args.repeat, lambda: columnar_pass(
                ctx, size, work / "split"))
        except GaveWay:
            columnar = None
        data = path.read_bytes()
        blocks: list[bytes] = []
        position = 0
        while position < len(data):
            end = data.rfind(b"\n", position, position + BLOCK) + 1
            blocks.append(data[position:end])
            position = end
        raws = [raw for block in blocks for raw in block.split(b"\n")[:-1]]
        slices = slices_of(blocks)
        decoded = [decode_block(block, start, end, count) for block, start, end, count in slices]
        if any(lines is None for lines in decoded):
            raise SystemExit("a slice of the generated ledger was not decoded in one call")
        lines = [line for block_lines in decoded for line in block_lines or []]

        def follow() -> None:
            rules = LedgerPass(ctx, None)
            number = 0
            for (block, start, end, _), block_lines in zip(slices, decoded, strict=True):
                number = rules.follow_lines(block_lines or [], number, RawLines(block, start, end, number + 1))

        stamps = [stamp for line in lines for stamp in (
            line.ts, line.started_at if line.started_at != line.ts else None, line.completed_at,
            *(artifact.synced_at for artifact in line.artifacts)) if stamp is not None]
        figures = {
            "msgspec decode, a call per line": fastest(args.repeat, lambda: [decode_job_line(r) for r in raws]),
            "msgspec decode, a call per slice": fastest(args.repeat, lambda: [
                decode_block(*piece) for piece in slices]),
            "timestamp checks, caches filled": fastest(args.repeat, lambda: [line.times_valid() for line in lines]),
            "timestamps from empty caches": fastest(args.repeat, lambda: three_pieces(stamps)),
            "  the same, 2-piece caches (before)": fastest(args.repeat, lambda: two_pieces(stamps)),
            "job rules (follow_lines)": fastest(args.repeat, follow),
            "secret scan": fastest(args.repeat, lambda: [list(find_secrets(b)) for b in blocks]),
            "whole pass, one process": fastest(args.repeat, lambda: scan(ctx, 0, len(data))),
            "  the same, lines decoded one by one": fastest(args.repeat, lambda: line_by_line(ctx, len(data))),
            "whole pass, two processes": split,
            "prefix hash (blake3)": fastest(args.repeat, lambda: hash_range(
                path, 0, len(data), checkpoint.PREFIX_HASHES["blake3"]())),
        }
        if columnar is not None:
            figures["columnar scan (child and secrets)"] = columnar
            figures["  its Struct proof of every line"] = fastest(args.repeat, lambda: ledger_columns.gate(
                ctx.path, size))
            figures["  its DuckDB rules and aggregation"] = fastest(args.repeat, lambda: ledger_columns.columnar_result(
                ctx, work / "split" / "columnar-here.jsonl"))
        else:
            print(f"the columnar scan gave way (DuckDB outgrew its {ledger_columns.MEMORY_LIMIT} limit): its stages "
                  "are left out; --lines 100000 or fewer measures them")
        gc.enable()
        import duckdb

        figures["duckdb sum(cost_usd)"] = fastest(args.repeat, lambda: duckdb.sql(
            f"SELECT sum(cost_usd) FROM read_ndjson_auto('{path}')").fetchall())
        arrow = arrow_strict_read(path)
        if arrow is not None:
            figures["pyarrow strict typed read"] = fastest(args.repeat, arrow)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    count = len(raws)
    duck, duck_cpu = figures["duckdb sum(cost_usd)"]
    print(f"{count:,} lines, {len(data) / 1e6:,.0f} MB")
    print(f"  {'stage':34} {'wall s':>7} {'µs/line':>8} {'×DuckDB':>8} {'CPU s':>7} {'×DuckDB':>8}")
    for name, (seconds, cpu) in figures.items():
        print(f"  {name:34} {seconds:7.3f} {seconds / count * 1e6:8.2f} {seconds / duck:7.2f}x {cpu:7.3f} "
              f"{cpu / duck_cpu:7.2f}x")
    one_cpu = figures["whole pass, one process"][1]
    print(f"  two processes: busier process {min(critical):.3f} s CPU = {min(critical) / one_cpu:.2f}x the one-process "
          f"pass's CPU (its wall time on two idle cores); both together "
          f"{figures['whole pass, two processes'][1] / one_cpu:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
