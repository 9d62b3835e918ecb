"""The full pass over a clean ledger as one columnar scan: in a forked child, the Structs prove every line a job
line exactly as the line-by-line pass decodes it (`core.job_line.decode_block`), then DuckDB reads the lines typed
and applies the job rules as SQL, aggregated by job and by deployment; this process scans for secrets meanwhile.
When any line or job might draw a finding (or a timestamp is not in the canonical `YYYY-MM-DDTHH:MM:SS.mmmZ` form),
the scan gives way (None) and the line-by-line pass (`audit.ledger_split`) decides: its findings stay the
reference. So the columnar scan only makes what that pass makes of a ledger where it finds nothing
(tests/audit/test_ledger_columns.py holds the two to each other, on generated ledgers too).

Not wired into the audit: DuckDB reads JSON leniently (a string where a number belongs is cast, an unknown field is
skipped, `null` reads as absent), so the Structs must prove the lines first, and their decoding plus the secret scan
already cost about two thirds of the whole line-by-line pass; DuckDB's typed read and rules cost more than the rest.
`python bench/ledger_pass_parts.py` times it against the pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from gpuharness.audit.ledger_pass import LatestSync, Openings, PassContext, PassResult, UnsyncedArtifact, spread
from gpuharness.audit.ledger_split import TailChild, TailReport
from gpuharness.core import regular_file
from gpuharness.core.job_line import decode_block
from gpuharness.core.ledger import TERMINAL
from gpuharness.core.secrets import find_secrets

#: Below this many bytes the line-by-line pass is as quick (DuckDB's start and a fork cost more than they save).
COLUMNAR_MIN_BYTES: Final = 16 << 20
BLOCK: Final = 4 << 20
#: DuckDB's memory ceiling in the child (the audit stays within 200 MB in all; DuckDB spills past it).
MEMORY_LIMIT: Final = "110MB"
STAMP: Final = "'%Y-%m-%dT%H:%M:%S.%gZ'"


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


#: Each line's values (the Structs have proved every line, so DuckDB's typed read finds what they found) and whether
#: it may draw a finding of its own: a timestamp not canonical, an unknown rate, a failed job without its error, times
#: missing or out of order, a duration or a cost that does not match, a correction without its reason. Then one
#: aggregation by job and by deployment.
SQL: Final = """
CREATE MACRO canonical(t) AS t IS NULL OR (regexp_full_match(t,
    '[0-9]{4}-[0-9]{2}-[0-9]{2}T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9][.][0-9]{3}Z')
    AND substr(t, 1, 4) BETWEEN '0002' AND '9998' AND TRY_CAST(substr(t, 1, 10) AS DATE) IS NOT NULL);
CREATE TEMP TABLE agg AS WITH raw AS (SELECT row_number() OVER () AS rn, * FROM read_json(LEDGER,
    format = 'newline_delimited', columns = {'id': 'VARCHAR', 'deployment_id': 'VARCHAR', 'status': 'VARCHAR',
    'ts': 'VARCHAR', 'provider': 'VARCHAR', 'gpu': 'VARCHAR', 'started_at': 'VARCHAR', 'completed_at': 'VARCHAR',
    'duration_s': 'DOUBLE', 'cost_usd': 'DOUBLE', 'error': 'VARCHAR', 'correction': 'BOOLEAN', 'reason': 'VARCHAR',
    'artifacts': 'STRUCT(name VARCHAR, synced_at VARCHAR, discarded BOOLEAN)[]'})),
kept AS (SELECT *, list_filter(coalesce(artifacts, []), lambda a: NOT coalesce(a.discarded, false)) AS live
    FROM raw),
line AS (SELECT rn, id, deployment_id AS dep, status, ts, started_at AS started, completed_at AS completed,
    duration_s AS duration, cost_usd AS cost, coalesce(provider, '') AS provider, coalesce(gpu, '') AS gpu,
    coalesce(correction, false) AS correction, substr(coalesce(completed_at, started_at, ts), 1, 10) AS day,
    list_max(list_transform(list_filter(live, lambda a: a.synced_at IS NOT NULL), lambda a: a.synced_at)) AS synced,
    coalesce(list_transform(list_filter(live, lambda a: a.synced_at IS NULL), lambda a: a.name)[-1], '') AS unsynced,
    (epoch_us(try_strptime(completed_at, STAMP)) - epoch_us(try_strptime(started_at, STAMP))) / 1e6 AS elapsed,
    r.rate, NOT (canonical(ts) AND canonical(started_at) AND canonical(completed_at)
        AND list_bool_and(list_transform(live, lambda a: canonical(a.synced_at))) IS NOT false)
    OR r.rate IS NULL OR (status = 'failed' AND coalesce(error, '') = '')
    OR (completed_at IS NOT NULL AND started_at IS NOT NULL AND (elapsed < 0 OR (duration_s IS NOT NULL
        AND abs(duration_s - elapsed) > 1.0 AND abs(duration_s - elapsed) > 0.01 * elapsed)))
    OR ((completed_at IS NULL OR started_at IS NULL) AND status = 'completed')
    OR (duration_s IS NOT NULL AND cost_usd IS NOT NULL AND abs(cost_usd - duration_s * r.rate / 3600.0)
        > ABS_TOL + REL_TOL * (duration_s * r.rate / 3600.0) - 1e-12)
    OR (coalesce(correction, false) AND coalesce(reason, '') = '') AS bad
    FROM kept LEFT JOIN rates r ON r.dep = kept.deployment_id)
SELECT GROUPING(id) AS by_deployment, id, dep, min(rn) AS first_rn, count(*) AS n, count_if(bad) AS bad,
    arg_max(status, rn) AS status, arg_max(coalesce(cost, 0.0), rn) AS cost, arg_max(day, rn) AS day,
    arg_max(provider, rn) AS provider, arg_max(gpu, rn) AS gpu, min(dep) AS first_dep, max(dep) AS last_dep,
    arg_max(unsynced, rn) AS unsynced, arg_min(correction, rn) AS opens_with_correction,
    min(rn) FILTER (WHERE status IN (TERMINAL)) AS terminal_rn, max(rn) FILTER (WHERE NOT correction) AS plain_rn,
    max(ts) AS last_ts, max({'s': synced, 'r': -rn}) FILTER (WHERE synced IS NOT NULL) AS sync,
    arg_max(id, {'s': synced, 'r': -rn}) FILTER (WHERE synced IS NOT NULL) AS sync_job
    FROM line GROUP BY GROUPING SETS ((id), (dep))
"""

#: Lines and jobs the rules may speak of (a superset: such a ledger takes the line-by-line pass): lines that may draw
#: a finding, a job that moved, opens with a correction or goes on after a terminal line, or is billed near the
#: per-job ceiling.
TROUBLE: Final = """
SELECT count(*) FROM agg WHERE by_deployment = 0 AND (bad > 0 OR first_dep <> last_dep OR opens_with_correction
    OR plain_rn > terminal_rn OR (? IS NOT NULL AND cost > ? - 1e-6))
"""


def _sql(ctx: PassContext) -> list[str]:
    text = (SQL.replace("LEDGER", "'" + ctx.path.replace("'", "''") + "'").replace("STAMP", STAMP)
            .replace("ABS_TOL", repr(float(ctx.abs_tol))).replace("REL_TOL", repr(float(ctx.rel_tol)))
            .replace("TERMINAL", _quoted(tuple(sorted(TERMINAL)))))
    return [statement for statement in text.split(";\n") if statement.strip()]


def columnar_result(ctx: PassContext, jobs_out: Path) -> PassResult | None:
    """The pass's result for a ledger where DuckDB finds no line and no job the rules speak of (else None). Every
    line must already be proved a job line by the Structs (`gate`)."""
    try:
        import duckdb
    except ImportError:  # a dev dependency only
        return None
    con = duckdb.connect(config={"threads": 2, "memory_limit": MEMORY_LIMIT, "preserve_insertion_order": True})
    try:
        con.execute("CREATE TEMP TABLE rates (dep VARCHAR, rate DOUBLE)")
        if ctx.cost_hr:
            con.executemany("INSERT INTO rates VALUES (?, ?)", list(ctx.cost_hr.items()))
        for statement in _sql(ctx):
            con.execute(statement)
        if con.execute(TROUBLE, [ctx.per_job_usd, ctx.per_job_usd]).fetchone() != (0,):
            return None
        return _result(con, jobs_out)
    except duckdb.Error:
        return None
    finally:
        con.close()


def _result(con: Any, jobs_out: Path) -> PassResult:
    """The PassResult of the clean ledger aggregated in DuckDB, as `LedgerPass.finish` makes it."""
    result = PassResult()
    states = con.execute("SELECT id, status, cost, day, CASE WHEN provider = '' THEN '?' ELSE provider END, "
                         "CASE WHEN gpu = '' THEN '?' ELSE gpu END, first_dep, unsynced FROM agg "
                         "WHERE by_deployment = 0 ORDER BY first_rn").fetchall()
    combos: dict[tuple[str, str, str, str], float] = {}
    for job_id, status, cost, day, provider, gpu, deployment, unsynced in states:
        if cost:
            key = (day, provider, gpu, deployment)
            combos[key] = combos.get(key, 0.0) + cost
        if status not in TERMINAL:
            result.opened[job_id] = deployment
        if unsynced:
            result.unsynced[job_id] = UnsyncedArtifact(deployment, unsynced)
    result.spend = spread(combos)
    result.new_jobs = result.touched = len(states)
    for deployment, count, last_ts, synced, synced_job in con.execute(
            "SELECT dep, n, last_ts, sync, sync_job FROM agg WHERE by_deployment = 1 ORDER BY first_rn").fetchall():
        result.lines += count
        result.dep_lines[deployment] = int(count)
        result.last_ts[deployment] = last_ts
        if synced is not None:
            result.synced_max[deployment] = LatestSync(synced["s"], synced_job)
    if states:
        with open(jobs_out, "wb") as handle:
            handle.write(msgspec.json.Encoder().encode_lines([state[:7] for state in states]))
        result.jobs_files.append(str(jobs_out))
    return result


def blocks(path: str, size: int) -> Any:
    """(block, end of its complete lines) of the first `size` bytes of the ledger; stops at a block without a
    newline (a line over a block, or a torn last line), yielding (b"", 0)."""
    with regular_file.open_stream(Path(path)) as handle:
        position = 0
        while position < size:
            data = handle.read(min(BLOCK, size - position))
            cut = data.rfind(b"\n") + 1
            if cut == 0:
                yield b"", 0
                return
            yield data, cut
            position += cut
            handle.seek(position)


def gate(path: str, size: int) -> int | None:
    """The number of lines when the Structs read every line as the line-by-line pass's decoding does, whole slices
    at a time (`core.job_line.decode_block`); None when any line is refused, or is not a lone object on its line."""
    lines = 0
    for data, cut in blocks(path, size):
        count = data.count(b"\n", 0, cut)
        if not cut or decode_block(data, 0, cut, count) is None:
            return None
        lines += count
    return lines


def no_secrets(ctx: PassContext, size: int) -> bool:
    """Whether the ledger holds no secret (the pass's own scan, `core.secrets.find_secrets`)."""
    for data, cut in blocks(ctx.path, size):
        if not cut or next(iter(find_secrets(data, cut, ctx.credentials)), None) is not None:
            return False
    return True


def columnar_scan(ctx: PassContext, size: int, jobs_out: Path, *, min_bytes: int = COLUMNAR_MIN_BYTES
                  ) -> PassResult | None:
    """The full pass of a clean ledger of `size` bytes, or None: too small, a line or a job the rules may speak of,
    or a secret; the line-by-line pass then runs. A forked child proves the lines and aggregates them in DuckDB
    while this process scans for secrets (this process does both where no child may be forked)."""
    if size < min_bytes:
        return None
    child = TailChild.fork(lambda: _report(ctx, size, jobs_out))
    if not no_secrets(ctx, size):
        if child is not None:
            child.stop()
        return None
    report = child.report() if child is not None else _report(ctx, size, jobs_out)
    return None if report is None else report.result()


def _report(ctx: PassContext, size: int, jobs_out: Path) -> TailReport | None:
    lines = gate(ctx.path, size)
    result = columnar_result(ctx, jobs_out) if lines is not None else None
    if result is None or result.lines != lines:
        return None
    return TailReport.of(result, Openings())
