"""The compiled line scanner (src/gpuharness/_linescan.c) against the Python pass it stands in for.

What it proves must be exactly what orjson and the job schema say, with the same values; what it cannot prove it
hands back. Generated and mutated ledger lines check the first; the equivalence of whole audits with and without it
is in test_audit_core.py.
"""

from __future__ import annotations

import json
import random
import shutil
import sysconfig
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuharness.audit import secrets
from gpuharness.audit.ledger_pass import fields_of, owner
from gpuharness.core import line_scanner, schema

DEMO_LEDGER = Path(__file__).resolve().parents[1] / "fixtures" / "demo" / ".pi" / "gpu" / "jobs.jsonl"
DEMO_LINES = DEMO_LEDGER.read_bytes().splitlines()
DEMO_RECORDS = [orjson.loads(line) for line in DEMO_LINES]


def scanner() -> Any:
    scan = line_scanner.compiled()
    if scan is None:
        compiler = sysconfig.get_config_var("CC") or "cc"
        if shutil.which(compiler.split()[0]):
            pytest.fail(f"the compiled scanner is not built although {compiler} is here: reinstall "
                        "(pip install -e '.[dev]') and read the build output for _linescan.c")
        pytest.skip("no C compiler here: the audit runs its pure-Python pass")
    return scan


def scan_one(line: bytes) -> tuple[Any, ...]:
    count, entries = scanner().scan_block(line + b"\n", len(line) + 1, 0, 1, {})
    assert count == 1 and len(entries) == 1
    return tuple(entries[0])


def same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    """Equal values of equal types (an int cost is not a float cost)."""
    return len(a) == len(b) and all(x == y and type(x) is type(y) for x, y in zip(a, b, strict=True))


def check_line(line: bytes) -> bool:
    """The scanner's verdict on one line is sound; returns whether it proved it."""
    entry = scan_one(line)
    if len(entry) == 3:  # handed back: the Python pass decides
        assert entry[0] == 0 and entry[1] == line and entry[2] is True
        return False
    record = orjson.loads(line)  # a proven line is strict JSON ...
    assert isinstance(record, dict)
    assert schema.fast_validator("job").is_valid(record), "proved a line the job schema refuses"  # ... of the schema
    expected = fields_of(record, {})
    assert same(entry[1:], expected[1:]), f"fields differ:\n compiled {entry[1:]}\n python   {expected[1:]}"
    return True


def test_the_scanner_is_built_where_a_compiler_is() -> None:
    assert scanner() is not None


def test_it_proves_the_demo_ledger_with_the_python_values() -> None:
    proven = sum(check_line(line) for line in DEMO_LINES)
    assert proven == len(DEMO_LINES)  # the writers' own lines are all in the form it proves


EDGE_VALUES: list[Any] = [
    None, True, False, 0, -0.0, -1, 1, 2**53, 10**15, 10**16, 1.5, 1e5, 1e-05, 3.0e2, 1e300, "", "x", "é", "\t",
    'quote"d', "back\\slash", "\u2028", "\ud7ff", "2026-11-01T09:05:28.695Z", "2026-11-01T09:05:28Z",
    "2026-11-01T09:05:28.695+00:00", "2026-02-29T00:00:00.000Z", "2024-02-29T00:00:00.000Z",
    "2026-04-31T00:00:00.000Z", "0000-01-01T00:00:00.000Z", "2026-11-01T24:00:00.000Z", "2026-11-01t09:05:28.695z",
    "2026-11-01 09:05:28.695Z", "2026-12-31T23:59:60.000Z", "queued", "completed", "failed", "running", [], {},
    [{"name": "a.png"}], [{"name": ""}], [{"name": "a", "synced_at": None}], [{"name": "a", "discarded": True}],
    [{"name": "a", "synced_at": "2026-11-01T09:05:28.695Z"}, {"name": "b", "synced_at": "2026-11-02T09:05:28.695Z"}],
    [{"name": "a", "size": -1}], [{"name": "a", "size": 1.0}], [{"name": "a", "extra": {"deep": [1, 2]}}], [1],
    {"nested": {"a": [1, {"b": None}]}},
]
FIELDS = ["id", "deployment_id", "status", "ts", "provider", "model", "workflow", "workflow_version", "inputs",
          "started_at", "completed_at", "duration_s", "cost_usd", "gpu", "artifacts", "error", "cause", "pid", "host",
          "attempt", "correction", "reason", "unknown_field"]
TEXT_EDITS = [b",", b"}", b"]", b'"', b"\\", b" ", b"\t", b"\r", b"\xff", b"\xc3", b"\x00", b"NaN", b"1e999", b"-",
              b'"id":"J-other",', b'"status":"failed",', b",}", b"{", b"00", b".5", b"\xed\xa0\x80"]


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    record = dict(draw(st.sampled_from(DEMO_RECORDS)))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(FIELDS))
        if draw(st.booleans()) and name in record:
            del record[name]
        else:
            record[name] = draw(st.sampled_from(EDGE_VALUES) | st.floats(allow_nan=False, allow_infinity=False)
                                | st.integers(-(2**70), 2**70) | st.text(max_size=4))
    if draw(st.booleans()):  # another key order: the id not first, so no worker can tell its owner from the bytes
        record = dict(draw(st.permutations(list(record.items()))))
    style = draw(st.sampled_from(["orjson", "ascii", "spaced"]))
    if style == "orjson" and all(not isinstance(v, int) or abs(v) < 2**63 for v in record.values()):
        line = orjson.dumps(record)
    else:
        line = json.dumps(record, ensure_ascii=style == "ascii",
                          separators=(", ", ": ") if style == "spaced" else (",", ":")).encode()
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(line)))
        edit = draw(st.sampled_from(TEXT_EDITS))
        how = draw(st.sampled_from(["insert", "overwrite", "delete"]))
        if how == "insert":
            line = line[:at] + edit + line[at:]
        elif how == "overwrite":
            line = line[:at] + edit + line[at + len(edit):]
        else:
            line = line[:at] + line[at + len(edit):]
    return line.replace(b"\n", b" ")


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_lines())
def test_what_it_proves_orjson_and_the_schema_accept_with_the_same_values(line: bytes) -> None:
    check_line(line)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")))
def test_arbitrary_bytes_are_handed_back_or_sound(line: bytes) -> None:
    check_line(line)


def test_the_mutations_reach_both_verdicts() -> None:
    """A generator whose lines were all proven (or all handed back) would test one side only."""
    rng = random.Random(7)
    verdicts = set()
    for record in rng.sample(DEMO_RECORDS, 200):
        verdicts.add(check_line(orjson.dumps(record)))
        verdicts.add(check_line(orjson.dumps(dict(record, ts=record["ts"].replace("Z", "+00:00")))))
    assert verdicts == {True, False}


@pytest.mark.parametrize("parts", [2, 3])
def test_each_proven_line_goes_to_its_owner_only_and_doubtful_ones_as_the_python_pass_splits_them(parts: int) -> None:
    lines = list(DEMO_LINES[:300])
    lines[10] = lines[10][:25]  # broken, but its raw id decides its owner
    lines[11] = b'{"deployment_id":"d","id":"J-late-id","status":"queued","ts":"x"}'  # no raw id: every worker
    record = orjson.loads(lines[12])  # proven, with the id last: its parsed id decides its owner
    lines[12] = orjson.dumps({**{k: v for k, v in record.items() if k != "id"}, "id": record["id"]})
    data = b"\n".join(lines) + b"\n"
    proven: dict[int, int] = {}
    for part in range(parts):
        count, entries = scanner().scan_block(data, len(data), part, parts, {})
        assert count == len(lines)
        for entry in entries:
            if len(entry) == 3:
                index, raw, decided = entry
                assert raw == lines[index]
                assert decided == (index == 10)
                if decided:
                    assert owner(raw[7:raw.index(b'"', 7)].decode(), parts) == part
                continue
            assert entry[0] not in proven
            proven[entry[0]] = part
            assert owner(entry[1], parts) == part
    assert sorted(proven) == [i for i in range(len(lines)) if i not in (10, 11)]


NEEDLES = tuple(n.lower() for n in secrets.RAW_NEEDLES) + secrets.LOWER_NEEDLES


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([b"a", b"p", b"i", b"x", b" ", b"_", b"R", b"P", b"A", b"Token", b"beaRer",
                                          b"secre", b"t", b"rpa_", b"PRIVATE KEY", b"pa", b"ss", b"\xc3\xa9"]),
                         max_size=12).map(b"".join), max_size=8))
def test_secret_candidates_are_exactly_the_lines_holding_a_keyword(rows: list[bytes]) -> None:
    data = b"\n".join(rows)
    spans = scanner().candidate_lines(data, len(data), NEEDLES)
    expected, start = [], 0
    for row in rows:
        if any(n in row.lower() for n in NEEDLES):
            expected.append((start, start + len(row)))
        start += len(row) + 1
    assert spans == expected


def test_python_candidates_remain_a_superset(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"\n".join([*DEMO_LINES[:50], b'{"note":"my api key"}', b'{"Bearer":1}', b"plain"]) + b"\n"
    compiled = secrets.candidate_lines(data)
    monkeypatch.setenv(line_scanner.ENV_VAR, "0")
    python = secrets.candidate_lines(data)
    assert compiled and set(compiled) <= set(python)


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """Canonical-looking timestamps, invalid ones included (month 13, April 31, 29 February, hour 24, second 60)."""
    year = draw(st.sampled_from([0, 1, 1900, 2000, 2024, 2026, 2100, 9999]))  # far apart: float rounding shows
    month, day = draw(st.integers(0, 13)), draw(st.integers(0, 32))
    hour, minute, second = draw(st.integers(0, 25)), draw(st.integers(0, 60)), draw(st.integers(0, 61))
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{draw(st.integers(0, 999)):03d}Z"
    return draw(st.sampled_from([text, text.lower(), text.replace("T", " "), text[:19] + "Z", text[:-1] + "+00:00"]))


@settings(max_examples=1500, deadline=None)
@given(st.sampled_from(DEMO_RECORDS), st.sampled_from(["ts", "started_at", "completed_at", "synced_at"]), timestamps())
def test_a_timestamp_is_proven_only_when_it_is_a_real_instant(record: dict[str, Any], field: str, stamp: str) -> None:
    if field == "synced_at":
        changed = dict(record, artifacts=[{"name": "a.png", "synced_at": stamp}])
    else:
        changed = dict(record, **{field: stamp})
    check_line(orjson.dumps(changed))


@st.composite
def ledgers(draw: st.DrawFn) -> bytes:
    """A slice of the demo ledger with some lines mutated, some repeated later (sequences), some appended."""
    start = draw(st.integers(0, len(DEMO_LINES) - 40))
    rows = list(DEMO_LINES[start:start + 30])
    for _ in range(draw(st.integers(0, 6))):
        at = draw(st.integers(0, len(rows) - 1))
        rows[at] = draw(mutated_lines())
    for _ in range(draw(st.integers(0, 4))):
        record = dict(orjson.loads(draw(st.sampled_from(DEMO_LINES[start:start + 30]))))
        record.update(draw(st.fixed_dictionaries({}, optional={
            "status": st.sampled_from(["running", "completed", "failed"]), "correction": st.booleans(),
            "reason": st.sampled_from(["", "fix"]), "deployment_id": st.sampled_from(["dep_rp_4090_01", "dep_x"]),
            "error": st.sampled_from([None, "", "OOM"])})))
        rows.append(orjson.dumps(record))
    return b"\n".join(rows) + b"\n"


def test_whole_audits_agree_with_and_without_the_scanner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scanner()
    from gpuharness.audit import ledger_pass, run_audit
    from gpuharness.core.clock import parse_ts

    demo = DEMO_LEDGER.parent
    monkeypatch.setattr(ledger_pass, "PARALLEL_MIN_BYTES", 0)
    now = parse_ts("2026-11-30T18:10:00Z")
    counter = iter(range(10**6))

    def outcome(registry: Path) -> Any:
        run = run_audit(registry, now, use_checkpoint=False)
        state = run.state
        states = {}
        for name in state.job_files:
            for row in Path(name).read_bytes().splitlines():
                entry = orjson.loads(row)
                states[entry[0]] = entry[1:]
        return (dict(run.counts), sorted(f.line() for fs in run.findings.values() for f in fs), state.line_count,
                {g: state.rounded(g) for g in ("day", "provider", "deployment")}, state.open_jobs, state.unsynced,
                state.synced_max, state.dep_lines, state.last_ts, states)

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ledgers(), st.sampled_from(["1", "2", "3"]))
    def check(ledger: bytes, procs: str) -> None:
        registry = tmp_path / f"r{next(counter)}"
        shutil.copytree(demo, registry, ignore=shutil.ignore_patterns("audit", "*.lock", "jobs.jsonl"))
        (registry / "jobs.jsonl").write_bytes(ledger)
        monkeypatch.setenv("GPUHARNESS_AUDIT_PROCS", procs)
        monkeypatch.setenv(line_scanner.ENV_VAR, "0")
        python = outcome(registry)
        monkeypatch.setenv(line_scanner.ENV_VAR, "1")
        assert outcome(registry) == python
        shutil.rmtree(registry)

    check()


def _current(path: Path, job_id: str | None, monkeypatch: pytest.MonkeyPatch, compiled: str,
             status: str | None = None) -> Any:
    from gpuharness.core.errors import UserError
    from gpuharness.core.ledger import Ledger

    monkeypatch.setenv(line_scanner.ENV_VAR, compiled)
    try:
        result = Ledger(path).current(job_id, status=status)
    except UserError as exc:
        return ("error", str(exc), exc.place, exc.hint)
    return sorted(result.items()) if isinstance(result, dict) and job_id is None else result


def test_current_lines_agree_with_and_without_the_scanner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scanner()
    path = tmp_path / "jobs.jsonl"

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
    @given(ledgers(), st.sampled_from([b"", b"\n", b'{"id":"J-tail"', b'{"id":"J-tail","status":"queued"}']))
    def check(ledger: bytes, tail: bytes) -> None:
        path.write_bytes(ledger + tail)
        ids: list[str | None] = [None, "J-tail", "J-none"]
        for raw in ledger.splitlines()[:40:7]:
            try:
                ids.append(str(orjson.loads(raw).get("id")))
            except (orjson.JSONDecodeError, AttributeError):
                continue
        for job_id in ids:
            expected = _current(path, job_id, monkeypatch, "0")
            assert _current(path, job_id, monkeypatch, "1") == expected, job_id
        for status in ("running", "completed"):
            expected = _current(path, None, monkeypatch, "0", status)
            assert _current(path, None, monkeypatch, "1", status) == expected, status

    check()


def test_current_lines_of_a_ledger_longer_than_a_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    scanner()
    from gpuharness.core import ledger as ledger_module

    monkeypatch.setattr(ledger_module, "BLOCK", 1000)  # lines straddle blocks; one line is longer than a block
    rows = list(DEMO_LINES[:300])
    rows[100] = orjson.dumps(dict(DEMO_RECORDS[99], inputs={"prompt": "x" * 3000}))
    rows[200] = orjson.dumps(dict(DEMO_RECORDS[199], ts="2026-11-01T00:00:00+00:00"))  # left to Python
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    for job_id in (None, DEMO_RECORDS[99]["id"], DEMO_RECORDS[199]["id"], DEMO_RECORDS[299]["id"]):
        assert _current(path, job_id, monkeypatch, "1") == _current(path, job_id, monkeypatch, "0")
    path.write_bytes(b"\n".join([*rows[:150], b"not json", *rows[150:]]) + b"\n")
    broken = _current(path, None, monkeypatch, "1")
    assert broken == _current(path, None, monkeypatch, "0") and broken[0] == "error" and broken[2] == "151:1"
