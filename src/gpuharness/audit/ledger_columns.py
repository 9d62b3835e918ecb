"""The full pass over a clean ledger as one columnar scan: DuckDB reads every line typed and applies the job rules as
SQL in a forked child, while this process proves each line an object of the job's fields alone (msgspec) and scans
for secrets. When any line would draw a finding, or might read differently in DuckDB and in the Structs (a `null`, a
backslash escape, an unknown field, a number that is not plain, a timestamp not in the canonical
`YYYY-MM-DDTHH:MM:SS.mmmZ` form), the scan gives way (None) and the line-by-line pass (`audit.ledger_split`) decides:
its findings stay the reference. So the columnar scan only makes what that pass makes of a ledger where it finds
nothing (tests/audit/test_ledger_columns.py holds the two to each other, on generated ledgers too).

Not yet wired into the audit: materialising the typed lines costs more time and memory than the two-process pass
(`python bench/ledger_pass_parts.py` times both); the next step is one aggregating scan (GROUPING SETS by job and by
deployment) with no per-line table, within the audit's 200 MB.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import msgspec

from gpuharness.audit.ledger_pass import LatestSync, Openings, PassContext, PassResult, UnsyncedArtifact, spread
from gpuharness.audit.ledger_split import TailChild, TailReport
from gpuharness.core import regular_file
from gpuharness.core.job_line import JobLine
from gpuharness.core.ledger import TERMINAL
from gpuharness.core.regular_file import JSONL_LINE
from gpuharness.core.secrets import find_secrets

#: Below this many bytes the line-by-line pass is as quick (DuckDB's start and a fork cost more than they save).
COLUMNAR_MIN_BYTES: Final = 16 << 20
BLOCK: Final = 4 << 20
#: The DuckDB child's memory ceiling (the audit stays within 200 MB in all).
MEMORY_LIMIT: Final = "1GB"
STATUSES: Final = ("queued", "running", "completed", "failed", "cancelled", "interrupted")
ARTIFACT_FIELDS: Final = ("name", "uri", "remote_path", "sha256", "size", "synced_at", "discarded")
_GATE = msgspec.json.Decoder(msgspec.defstruct(
    "JobKeys", [(name, msgspec.Raw, msgspec.UNSET) for name in JobLine.__struct_fields__],
    forbid_unknown_fields=True, gc=False))


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f"'{value}'" for value in values)


#: Lines and jobs, typed. `plain`: the line reads the same in DuckDB and in the Structs and draws no finding of its
#: own; the job-level rules (sequence, per-job ceiling) are judged on the per-job rows.
SQL: Final = """
CREATE MACRO canonical(t) AS t IS NULL OR (regexp_full_match(t,
    '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}[.][0-9]{3}Z')
    AND substr(t, 1, 4) BETWEEN '0002' AND '9998' AND substr(t, 18, 2) < '60'
    AND try_strptime(t, '%Y-%m-%dT%H:%M:%S.%gZ') IS NOT NULL);
CREATE MACRO text_or_absent(j) AS j IS NULL OR json_type(j) = 'VARCHAR';
CREATE MACRO whole_at_least(j, lowest) AS json_type(j) = 'UBIGINT'
    AND j::UBIGINT BETWEEN lowest AND 9223372036854775807;
CREATE MACRO amount(j) AS j IS NULL OR (json_type(j) IN ('DOUBLE', 'UBIGINT', 'BIGINT') AND j::DOUBLE >= 0
    AND j::DOUBLE < 1e15);
CREATE MACRO artifact_ok(a) AS json_type(a) = 'OBJECT' AND len(json_keys(a)) = len(list_distinct(json_keys(a)))
    AND list_has_all([ARTIFACT_FIELDS], json_keys(a))
    AND json_type(a, '$.name') = 'VARCHAR' AND length(a->>'$.name') > 0
    AND coalesce(json_type(a, '$.uri'), 'VARCHAR') = 'VARCHAR'
    AND coalesce(json_type(a, '$.remote_path'), 'VARCHAR') = 'VARCHAR'
    AND coalesce(json_type(a, '$.sha256'), 'VARCHAR') = 'VARCHAR'
    AND (json_type(a, '$.size') IS NULL OR whole_at_least(json_extract(a, '$.size'), 0))
    AND coalesce(json_type(a, '$.discarded'), 'BOOLEAN') = 'BOOLEAN'
    AND coalesce(json_type(a, '$.synced_at'), 'VARCHAR') = 'VARCHAR' AND canonical(a->>'$.synced_at');
CREATE TEMP TABLE judged AS WITH lines AS (SELECT row_number() OVER () AS rn, *
    FROM read_json(LEDGER, format = 'newline_delimited', columns = {COLUMNS}, maximum_object_size = MAX_OBJECT)),
typed AS (SELECT rn, id->>'$' AS id, deployment_id->>'$' AS dep, status->>'$' AS status,
    ts->>'$' AS ts, started_at->>'$' AS started, completed_at->>'$' AS completed, duration_s::DOUBLE AS duration,
    cost_usd::DOUBLE AS cost, coalesce(provider->>'$', '') AS provider, coalesce(gpu->>'$', '') AS gpu,
    coalesce(correction::BOOLEAN, false) AS correction, coalesce(reason->>'$', '') AS reason,
    coalesce(error->>'$', '') AS error,
    CASE WHEN artifacts IS NULL THEN [] ELSE json_extract(artifacts, '$[*]') END AS arts,
    json_type(id) = 'VARCHAR' AND length(id->>'$') > 0 AND json_type(deployment_id) = 'VARCHAR'
    AND length(deployment_id->>'$') > 0 AND json_type(status) = 'VARCHAR' AND status->>'$' IN (STATUSES)
    AND json_type(ts) = 'VARCHAR' AND canonical(ts->>'$') AND text_or_absent(started_at)
    AND canonical(started_at->>'$') AND text_or_absent(completed_at) AND canonical(completed_at->>'$')
    AND text_or_absent(provider) AND text_or_absent(gpu) AND text_or_absent(model) AND text_or_absent(workflow)
    AND text_or_absent(error) AND text_or_absent(cause) AND text_or_absent(host) AND text_or_absent(reason)
    AND (workflow_version IS NULL OR json_type(workflow_version) = 'BIGINT' OR whole_at_least(workflow_version, 0))
    AND (pid IS NULL OR whole_at_least(pid, 1)) AND (attempt IS NULL OR whole_at_least(attempt, 1))
    AND amount(duration_s) AND amount(cost_usd) AND (correction IS NULL OR json_type(correction) = 'BOOLEAN')
    AND (inputs IS NULL OR (json_type(inputs) = 'OBJECT' AND strpos(inputs::VARCHAR, '[') = 0
        AND strpos(substr(inputs::VARCHAR, 2), '{') = 0
        AND NOT regexp_matches(inputs::VARCHAR, '[0-9]{16}|[eE][+-]?[0-9]{3}|(?i:nan|inf)')))
    AND (artifacts IS NULL OR (json_type(artifacts) = 'ARRAY'
        AND list_bool_and(list_transform(json_extract(artifacts, '$[*]'), lambda a: artifact_ok(a))) IS NOT false))
    AS typed
    FROM lines)
SELECT t.*, r.rate,
    substr(coalesce(completed, started, ts), 1, 10) AS day,
    (epoch_us(strptime(completed, '%Y-%m-%dT%H:%M:%S.%gZ'))
     - epoch_us(strptime(started, '%Y-%m-%dT%H:%M:%S.%gZ'))) / 1e6 AS elapsed,
    list_max(list_filter(list_transform(arts, lambda a: CASE WHEN coalesce(a->>'$.discarded', 'false') = 'false'
        THEN a->>'$.synced_at' END), lambda s: s IS NOT NULL)) AS synced,
    coalesce(list_filter(list_transform(arts, lambda a: CASE WHEN coalesce(a->>'$.discarded', 'false') = 'false'
        AND a->>'$.synced_at' IS NULL THEN a->>'$.name' END), lambda s: s IS NOT NULL)[-1], '') AS unsynced
    FROM typed t LEFT JOIN rates r ON r.dep = t.dep;
"""


def _sql(path: str) -> str:
    return (SQL.replace("LEDGER", "'" + path.replace("'", "''") + "'").replace("COLUMNS", _columns())
            .replace("MAX_OBJECT", str(JSONL_LINE))
            .replace("STATUSES", _quoted(STATUSES)).replace("ARTIFACT_FIELDS", _quoted(ARTIFACT_FIELDS)))


#: The lines that draw a finding of their own (typed lines only): an unknown rate, a failed job without its error,
#: times missing or out of order, a duration or a cost that does not match, a correction without its reason.
LINE_FINDINGS: Final = """
SELECT count(*) FROM judged WHERE rate IS NULL OR (status = 'failed' AND error = '')
    OR (completed IS NOT NULL AND started IS NOT NULL AND (elapsed < 0 OR (duration IS NOT NULL
        AND abs(duration - elapsed) > 1.0 AND abs(duration - elapsed) > 0.01 * elapsed)))
    OR ((completed IS NULL OR started IS NULL) AND status = 'completed')
    OR (duration IS NOT NULL AND cost IS NOT NULL
        AND abs(cost - duration * rate / 3600.0) > ? + ? * (duration * rate / 3600.0) - 1e-12)
    OR (correction AND reason = '')
"""

JOBS: Final = f"""
CREATE TEMP TABLE jobs AS SELECT id, min(rn) AS first_rn, count(*) AS n, arg_max(status, rn) AS status,
    arg_max(coalesce(cost, 0.0), rn) AS cost, arg_max(day, rn) AS day, arg_max(provider, rn) AS provider,
    arg_max(gpu, rn) AS gpu, min(dep) AS dep, max(dep) AS last_dep, arg_max(unsynced, rn) AS unsynced,
    arg_min(correction, rn) AS opens_with_correction,
    min(rn) FILTER (WHERE status IN ({_quoted(tuple(sorted(TERMINAL)))})) AS terminal_rn,
    max(rn) FILTER (WHERE NOT correction) AS plain_rn
    FROM judged GROUP BY id;
"""

#: Jobs the sequence rule or the per-job ceiling may speak of (a superset: such a ledger takes the line-by-line pass).
JOB_FINDINGS: Final = """
SELECT count(*) FROM jobs WHERE dep <> last_dep OR opens_with_correction OR plain_rn > terminal_rn
    OR (? IS NOT NULL AND cost > ? - 1e-6)
"""

DEPLOYMENTS: Final = """
SELECT dep, count(*), max(ts), max({'s': synced, 'r': -rn}) FILTER (WHERE synced IS NOT NULL),
    arg_max(id, {'s': synced, 'r': -rn}) FILTER (WHERE synced IS NOT NULL)
    FROM judged GROUP BY dep ORDER BY min(rn)
"""


def _columns() -> str:
    return ", ".join(f"'{name}': 'JSON'" for name in JobLine.__struct_fields__)


def columnar_result(ctx: PassContext, jobs_out: Path) -> PassResult | None:
    """The pass's result for a ledger where DuckDB finds no line and no job the rules speak of (else None)."""
    import duckdb

    con = duckdb.connect(config={"threads": 2, "memory_limit": MEMORY_LIMIT, "preserve_insertion_order": True})
    try:
        con.execute("CREATE TEMP TABLE rates (dep VARCHAR, rate DOUBLE)")
        if ctx.cost_hr:
            con.executemany("INSERT INTO rates VALUES (?, ?)", list(ctx.cost_hr.items()))
        for statement in _sql(ctx.path).split(";\n"):
            if statement.strip():
                con.execute(statement)
        if con.execute("SELECT count(*) FROM judged WHERE NOT typed").fetchone() != (0,):
            return None
        if con.execute(LINE_FINDINGS, [ctx.abs_tol, ctx.rel_tol]).fetchone() != (0,):
            return None
        con.execute(JOBS)
        if con.execute(JOB_FINDINGS, [ctx.per_job_usd, ctx.per_job_usd]).fetchone() != (0,):
            return None
        return _result(con, jobs_out)
    except duckdb.Error:
        return None
    finally:
        con.close()


def _result(con: Any, jobs_out: Path) -> PassResult:
    """The PassResult of the clean ledger in DuckDB's tables, as `LedgerPass.finish` makes it."""
    result = PassResult()
    row = con.execute("SELECT count(*) FROM judged").fetchone()
    result.lines = int(row[0]) if row else 0
    states = con.execute("SELECT id, status, cost, day, CASE WHEN provider = '' THEN '?' ELSE provider END, "
                         "CASE WHEN gpu = '' THEN '?' ELSE gpu END, dep, unsynced FROM jobs ORDER BY first_rn"
                         ).fetchall()
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
    for deployment, count, last_ts, synced, synced_job in con.execute(DEPLOYMENTS).fetchall():
        result.dep_lines[deployment] = int(count)
        result.last_ts[deployment] = last_ts
        if synced is not None:
            result.synced_max[deployment] = LatestSync(synced["s"], synced_job)
    if states:
        with open(jobs_out, "wb") as handle:
            handle.write(msgspec.json.Encoder().encode_lines([state[:7] for state in states]))
        result.jobs_files.append(str(jobs_out))
    return result


def screened(ctx: PassContext, size: int) -> int | None:
    """The number of lines when every line is a lone JSON object of the job's fields alone, as msgspec reads it,
    holding no `null`, no backslash and no secret (else None: the line-by-line pass decides)."""
    lines = 0
    with regular_file.open_stream(Path(ctx.path)) as handle:
        position = 0
        while position < size:
            data = handle.read(min(BLOCK, size - position))
            cut = data.rfind(b"\n") + 1
            if cut == 0 or data[0] != 0x7B or data[cut - 2] != 0x7D:
                return None
            count = data.count(b"\n", 0, cut)
            if (data.count(b"}\n{", 0, cut) != count - 1 or data.find(b"null", 0, cut) >= 0
                    or data.find(b"\\", 0, cut) >= 0):
                return None
            try:
                if len(_GATE.decode_lines(memoryview(data)[:cut])) != count:
                    return None
            except (msgspec.DecodeError, RecursionError):
                return None
            if next(iter(find_secrets(data, cut, ctx.credentials)), None) is not None:
                return None
            lines += count
            position += cut
            handle.seek(position)
    return lines


def columnar_scan(ctx: PassContext, size: int, jobs_out: Path, *, min_bytes: int = COLUMNAR_MIN_BYTES
                  ) -> PassResult | None:
    """The full pass of a clean ledger of `size` bytes (whole lines), or None: too small, a line or a job the rules
    may speak of, or no child could be forked; the line-by-line pass then runs."""
    if size < min_bytes:
        return None
    child = TailChild.fork(lambda: _report(ctx, jobs_out))
    if child is None:
        return None
    lines = screened(ctx, size)
    if lines is None:
        child.stop()
        return None
    report = child.report()
    if report is None or report.lines != lines:
        return None
    return report.result()


def _report(ctx: PassContext, jobs_out: Path) -> TailReport | None:
    result = columnar_result(ctx, jobs_out)
    return None if result is None else TailReport.of(result, Openings())
