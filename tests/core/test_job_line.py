"""The typed ledger line (`core.job_line.JobLine`, msgspec) against the job schema, the published contract.

Over generated and mutated ledger lines: what the Struct accepts on its own, the schema accepts with the same
values; and the line reader (the Struct, then orjson and the schema for what it refuses) accepts exactly the lines
that orjson parses and the schema accepts. The one place where the reader is stricter (date-times the schema's
format admits that are no instant of the UTC calendar) is part of the reference below, and named.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import jsonschema_rs
import msgspec
import mutants
import orjson
import pytest
from checkout import ROOT
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from gpuharness.core import job_line, schema, secrets
from gpuharness.core.clock import format_ts, parse_ts
from gpuharness.core.errors import UserError
from gpuharness.core.job_line import INPUT_DEPTH, JobLine, Refusal, decode_block, decode_job_line, read_job_line
from gpuharness.core.ledger import Ledger

DEMO_LEDGER = ROOT / "fixtures" / "demo" / ".pi" / "gpu" / "jobs.jsonl"
DEMO_LINES = DEMO_LEDGER.read_bytes().splitlines()
DEMO_RECORDS = [orjson.loads(line) for line in DEMO_LINES]
TIMESTAMP_FIELDS = ("ts", "started_at", "completed_at")
DATE_TIME = jsonschema_rs.Draft202012Validator({"type": "string", "format": "date-time"},
                                                       validate_formats=True)


def utc_instant(text: str) -> bool:
    try:
        format_ts(parse_ts(text))
    except (ValueError, OverflowError):
        return False
    return True


def timestamps_of(record: dict[str, Any]) -> list[Any]:
    stamps = [record.get(name) for name in TIMESTAMP_FIELDS]
    artifacts = record.get("artifacts")
    if isinstance(artifacts, list):
        stamps += [a.get("synced_at") for a in artifacts if isinstance(a, dict)]
    return [s for s in stamps if isinstance(s, str)]


def reference(raw: bytes) -> dict[str, Any] | None:
    """The contract's verdict: the record when orjson parses an object the job schema accepts (unknown fields
    allowed, as the audit reads the ledger) whose date-times are instants of the UTC calendar, else None."""
    try:
        record = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(record, dict) or not schema.is_valid_fast("job", record):
        return None
    return record if all(utc_instant(s) for s in timestamps_of(record)) else None


def values_agree(line: JobLine, record: dict[str, Any]) -> None:
    """Every field of the record the Struct knows has the same value in the Struct (numbers as numbers)."""
    for name in JobLine.__struct_fields__:
        if name not in record:
            continue
        value = getattr(line, name)
        if name == "artifacts":
            for artifact, item in zip(value, record[name], strict=True):
                assert {k: getattr(artifact, k) for k in item} == item
            continue
        if name in ("duration_s", "cost_usd") and value is not None:  # numbers: an integer is read as a float
            assert isinstance(value, float) and value == float(record[name]), name
        else:
            assert value == record[name], name


def check_line(raw: bytes) -> str:
    """Hold the Struct and the reader to the reference on one line; return how the line was decided."""
    expected = reference(raw)
    verdict = read_job_line(raw)
    assert isinstance(verdict, JobLine) == (expected is not None), (raw, verdict)
    try:
        struct = decode_job_line(raw)
    except job_line.DECODE_ERRORS:
        return "settled"
    if not struct.times_valid():
        return "settled"
    # accepted by the Struct alone: the strict schema (unknown fields refused) accepts the same record
    record = orjson.loads(raw)
    assert schema.strict_validator("job").is_valid(record), raw
    assert expected is not None
    values_agree(struct, record)
    return "struct"


def test_every_demo_line_is_decoded_by_the_struct_alone_with_the_orjson_values() -> None:
    assert {check_line(line) for line in DEMO_LINES} == {"struct"}


EDGE_VALUES: list[Any] = [
    None, True, False, 0, -0.0, -1, 1, 1.0, 2**53, 2**53 + 1, 2**63 - 1, 2**63, 2**64, 10**15, 10**16, 10**30, 1.5,
    1e5, 1e-05, 3.0e2, 1e300, "", "x", "é", "\t", 'quote"d', "back\\slash", "\u2028", "\ud7ff", "😀",
    "2026-11-01T09:05:28.695Z", "2026-11-01T09:05:28Z", "2026-11-01T09:05:28.695+00:00", "2026-02-29T00:00:00.000Z",
    "2024-02-29T00:00:00.000Z", "2026-04-31T00:00:00.000Z", "0000-01-01T00:00:00.000Z", "2026-11-01T24:00:00.000Z",
    "2026-11-01t09:05:28.695z", "2026-11-01 09:05:28.695Z", "2026-12-31T23:59:60.000Z", "2026-11-01T09:05:28+0000",
    "9999-12-31T23:59:59-01:00", "queued", "completed", "failed", "running", [], {},
    [{"name": "a.png"}], [{"name": ""}], [{"name": "a", "synced_at": None}], [{"name": "a", "discarded": True}],
    [{"name": "a", "synced_at": "2026-11-01T09:05:28.695Z"}, {"name": "b", "synced_at": "2026-11-02T09:05:28.695Z"}],
    [{"name": "a", "size": -1}], [{"name": "a", "size": 1.0}], [{"name": "a", "extra": {"deep": [1, 2]}}], [1],
    {"nested": {"a": [1, {"b": None}]}}, {"deep": [[[[[[1]]]]]]}, {"big": 10**400}, {"n": 2**64},
]
FIELDS = ["id", "deployment_id", "status", "ts", "provider", "model", "workflow", "workflow_version", "inputs",
          "started_at", "completed_at", "duration_s", "cost_usd", "gpu", "artifacts", "error", "cause", "pid", "host",
          "attempt", "correction", "reason", "unknown_field"]
TEXT_EDITS = [b",", b"}", b"]", b'"', b"\\", b" ", b"\t", b"\r", b"\xff", b"\xc3", b"\x00", b"NaN", b"1e999", b"-",
              b'"id":"J-other",', b'"id":7,', b'"status":"failed",', b",}", b"{", b"00", b".5", b"\xed\xa0\x80",
              b"\\ud800", b"1" * 320, b'"x":' + b"9" * 320 + b",", b'"unknown_field":"\xff",']


def dumps(draw: st.DrawFn, record: dict[str, Any]) -> bytes:
    style = draw(st.sampled_from(["orjson", "ascii", "spaced"]))
    if style == "orjson":
        try:
            return orjson.dumps(record)
        except (TypeError, orjson.JSONEncodeError):  # an integer beyond 64 bits
            pass
    return json.dumps(record, ensure_ascii=style == "ascii",
                      separators=(", ", ": ") if style == "spaced" else (",", ":")).encode()


@st.composite
def mutated_lines(draw: st.DrawFn) -> bytes:
    """A demo line with fields replaced by edge values or removed, reordered, then edited as text."""
    record = dict(draw(st.sampled_from(DEMO_RECORDS)))
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(FIELDS))
        if draw(st.booleans()) and name in record:
            del record[name]
        else:
            record[name] = draw(st.sampled_from(EDGE_VALUES) | st.floats(allow_nan=False, allow_infinity=False)
                                | st.integers(-(2**70), 2**70) | st.text(max_size=4))
    if draw(st.booleans()):
        record = dict(draw(st.permutations(list(record.items()))))
    line = dumps(draw, record)
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


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6) | st.sampled_from(EDGE_VALUES),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)


@st.composite
def structural_mutants(draw: st.DrawFn) -> bytes:
    """A demo line with one to three values replaced, deleted or added anywhere in it (tests/mutants.py)."""
    document: Any = draw(st.sampled_from(DEMO_RECORDS))
    for _ in range(draw(st.integers(1, 3))):
        document = draw(mutants.mutant(document, json_values, st.sampled_from(FIELDS) | st.text(max_size=6)))
    return dumps(draw, document) if isinstance(document, dict) else json.dumps(document).encode()


@st.composite
def duplicate_keys(draw: st.DrawFn) -> bytes:
    """A demo line with one key written twice, the first value drawn from edge values (the last one wins)."""
    record = draw(st.sampled_from(DEMO_RECORDS))
    name = draw(st.sampled_from(FIELDS))
    first = json.dumps(draw(st.sampled_from(EDGE_VALUES)))
    return b"{" + json.dumps(name).encode() + b":" + first.encode() + b"," + orjson.dumps(record)[1:]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_lines() | structural_mutants() | duplicate_keys())
def test_the_struct_and_the_job_schema_accept_and_refuse_the_same_lines(line: bytes) -> None:
    check_line(line)


@settings(max_examples=500, deadline=None)
@given(st.binary(max_size=200).map(lambda b: b.replace(b"\n", b"")))
def test_arbitrary_bytes_are_refused_or_read_as_the_schema_says(line: bytes) -> None:
    check_line(line)


def test_the_mutations_reach_the_struct_and_the_settling_path() -> None:
    """A generator whose lines were all decided one way would test one side only."""
    rng = random.Random(7)
    ways = set()
    for record in rng.sample(DEMO_RECORDS, 200):
        ways.add(check_line(orjson.dumps(record)))
        ways.add(check_line(orjson.dumps(dict(record, ts=record["ts"].replace("Z", "+00:00"), attempt=1.0))))
    assert ways == {"struct", "settled"}


@pytest.mark.parametrize(("change", "accepted"), [
    ({"unknown_field": 1}, True),  # unknown fields are the schema's warnings, not errors
    ({"unknown_field": "\udcff"}, False),  # not UTF-8 (written below as raw bytes)
    ({"attempt": 1.0}, True),  # an integral float is a JSON Schema integer
    ({"pid": 2**64}, True),  # beyond 64 bits: orjson reads it as a float, still an integer
    ({"inputs": {"big": 10**400}}, False),  # orjson cannot read it (infinite as a double)
    ({"inputs": {"deep": [[[[[[1]]]]]]}}, True),  # deeper than INPUT_DEPTH: settled by orjson and the schema
    ({"ts": "2026-12-31T23:59:60.000Z"}, True),  # a leap second: the format allows it
    ({"ts": "2026-06-30T12:00:60.000Z"}, False),  # a leap second not at 23:59 UTC
    ({"ts": "2026-11-01 09:05:28.695Z"}, False),  # RFC 3339 wants T (msgspec's datetime would take a space)
    ({"ts": "2026-11-01T09:05:28+0000"}, False),  # and a colon in the offset
    ({"ts": "2026-11-01t09:05:28.695z"}, True),
    ({"ts": "0000-01-01T00:00:00.000Z"}, False),  # the format admits year 0000; no UTC instant: refused
    ({"cost_usd": -0.0}, True),
    ({"status": "done"}, False),
])
def test_each_known_difference_between_msgspec_and_the_schema_is_settled(change: dict[str, Any],
                                                                         accepted: bool) -> None:
    record = dict(DEMO_RECORDS[2], **change)
    raw = json.dumps(record, ensure_ascii=False).encode("utf-8", "surrogateescape")
    assert isinstance(read_job_line(raw), JobLine) == accepted
    check_line(raw)


def test_a_duplicate_key_is_read_as_orjson_reads_it_the_last_one() -> None:
    tail = orjson.dumps(DEMO_RECORDS[2])[1:]
    assert isinstance(read_job_line(b'{"id":7,' + tail), JobLine)  # orjson keeps the last id
    assert isinstance(read_job_line(b'{"status":"done",' + tail), JobLine)
    line = read_job_line(b'{"id":"J-first",' + tail)
    assert isinstance(line, JobLine) and line.id == DEMO_RECORDS[2]["id"]


def test_a_refused_line_says_whether_it_is_json_and_keeps_the_record_for_the_explanation() -> None:
    torn = read_job_line(DEMO_LINES[0][:40])
    assert isinstance(torn, Refusal) and torn.record is None and torn.problem.startswith("not valid JSON")
    array = read_job_line(b"[1, 2]")
    assert isinstance(array, Refusal) and array.record is None and "JSON object" in array.problem
    wrong = read_job_line(orjson.dumps(dict(DEMO_RECORDS[0], cost_usd="free")))
    assert isinstance(wrong, Refusal) and wrong.record is not None and wrong.record["cost_usd"] == "free"


def test_inputs_are_read_to_their_depth() -> None:
    nested: Any = 1
    for _ in range(INPUT_DEPTH - 1):  # inputs itself is the first level
        nested = [nested]
    raw = orjson.dumps(dict(DEMO_RECORDS[0], inputs={"x": nested}))
    assert decode_job_line(raw).inputs == {"x": nested}
    with pytest.raises(msgspec.ValidationError):
        decode_job_line(orjson.dumps(dict(DEMO_RECORDS[0], inputs={"x": [nested]})))


def per_line(block: bytes) -> list[Any]:
    """What decoding each line of a block on its own gives: the line, or None where the Struct refuses it."""
    decoded: list[Any] = []
    for raw in block.split(b"\n")[:-1]:
        try:
            decoded.append(decode_job_line(raw))
        except job_line.DECODE_ERRORS:
            decoded.append(None)
    return decoded


@st.composite
def blocks(draw: st.DrawFn) -> bytes:
    """Demo lines, some mutated, some cut in two or joined, some blank or padded: a block of complete lines."""
    rows = [draw(st.sampled_from(DEMO_LINES)) for _ in range(draw(st.integers(1, 8)))]
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(rows) - 1))
        row = rows[at]
        cut = draw(st.integers(0, len(row)))
        rows[at:at + 1] = draw(st.sampled_from([
            [draw(mutated_lines())], [row[:cut], row[cut:]], [row + row], [row + b"," + row], [b""], [b" " + row],
            [row + b" "], [row + b"\r"], [row[:cut] + b"\n" + row[cut:]], [row.replace(b",", b",\n", 1)]]))
    return b"\n".join(rows) + b"\n"


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks())
def test_a_block_decoded_in_one_call_is_each_line_decoded_on_its_own(block: bytes) -> None:
    count = block.count(b"\n")
    lines = decode_block(b"xx" + block + b"yy", 2, 2 + len(block), count)
    if lines is not None:  # never a different reading: else the block is read line by line
        assert lines == per_line(block)


def test_a_block_of_good_lines_is_decoded_in_one_call() -> None:
    block = b"\n".join(DEMO_LINES[:50]) + b"\n"
    lines = decode_block(block, 0, len(block), 50)
    assert lines is not None and lines == per_line(block)
    # one object over two lines and two objects on one: as many values as lines, yet not one per line
    spread = DEMO_LINES[0].replace(b",", b",\n", 1) + b"\n" + DEMO_LINES[1] + DEMO_LINES[2] + b"\n"
    for joined in (b"\n".join(DEMO_LINES[:2]) + DEMO_LINES[2] + b"\n", block.replace(b"\n", b"\n\n", 1), spread):
        assert decode_block(joined, 0, len(joined), joined.count(b"\n")) is None


@st.composite
def timestamps(draw: st.DrawFn) -> str:
    """Canonical-looking timestamps, invalid ones included (month 13, April 31, 29 February, hour 24, second 60)."""
    year = draw(st.sampled_from([0, 1, 1900, 2000, 2024, 2026, 2100, 9999]))
    month, day = draw(st.integers(0, 13)), draw(st.integers(0, 32))
    hour, minute, second = draw(st.integers(0, 25)), draw(st.integers(0, 60)), draw(st.integers(0, 61))
    text = f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{draw(st.integers(0, 999)):03d}Z"
    offset = draw(st.sampled_from(["+00:00", "-01:00", "+05:30", "+23:59", "-00:00", "+24:00", "+0100"]))
    return draw(st.sampled_from([text, text.lower(), text.replace("T", " "), text[:19] + "Z", text[:-1] + offset,
                                 text[:19] + offset, text[:-1] + "123456Z"]))


@settings(max_examples=3000, deadline=None)
@given(timestamps(), timestamps())
@example("0000-00-00T00:00:15.000+23:59", "0001-01-01T00:00:00.000Z")  # a year-0001 head with a positive offset
@example("2026-11-01T09:05:28.695Z", "2026-11-01T23:59:60.000Z")
def test_a_timestamp_is_a_date_time_exactly_when_the_schema_format_says_and_it_is_a_utc_instant(a: str, b: str) -> None:
    # pieces each seen valid may be joined: the caches must still answer as the format does
    for text in (a, b, a[:16] + b[16:], b[:16] + a[16:], a[:13] + b[13:], b[:13] + a[13:], a[:19] + b[19:],
                 b[:19] + a[19:], a[:13] + b[13:19] + a[19:], b[:13] + a[13:19] + b[19:]):
        assert job_line.is_date_time(text) == (bool(DATE_TIME.is_valid(text)) and utc_instant(text)), text


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.sampled_from([b"a", b"p", b"i", b"x", b" ", b"_", b"R", b"P", b"A", b"Token", b"beaRer",
                                          b"secre", b"t", *secrets.RAW_NEEDLES, b"pa", b"ss", b"\xc3\xa9"]),
                         max_size=12).map(b"".join), max_size=8))
def test_secret_candidates_include_every_line_holding_a_keyword(rows: list[bytes]) -> None:
    data = b"\n".join(rows)
    needles = tuple(n.lower() for n in secrets.RAW_NEEDLES) + secrets.LOWER_NEEDLES
    spans = secrets.candidate_lines(data)
    expected, start = [], 0
    for row in rows:
        if any(n in row.lower() for n in needles):
            expected.append((start, start + len(row)))
        start += len(row) + 1
    assert set(expected) <= set(spans)


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


def current_by_records(path: Path, job_id: str | None, status: str | None = None) -> Any:
    """current() as the specification reads it: every record (orjson), the last one of each job."""
    ledger = Ledger(path)
    try:
        last: dict[str, dict[str, Any]] = {}
        for lineno, record in enumerate(ledger.records(), start=1):
            key = record.get("id")
            if job_id is None and not isinstance(key, str):
                raise UserError("a ledger line without a string \"id\"", path=path, place=f"{lineno}:1",
                                hint="repair that line by hand; nothing was changed")
            if isinstance(key, str):
                last[key] = record
    except UserError as exc:
        return ("error", exc.place, exc.hint)
    if job_id is not None:
        return last.get(job_id)
    return sorted((k, v) for k, v in last.items() if status is None or v.get("status") == status)


def current(path: Path, job_id: str | None, status: str | None = None) -> Any:
    try:
        result = Ledger(path).current(job_id, status=status)
    except UserError as exc:
        return ("error", exc.place, exc.hint)
    return sorted(result.items()) if isinstance(result, dict) and job_id is None else result


def test_current_lines_are_the_last_records_of_each_job(tmp_path: Path) -> None:
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
            assert current(path, job_id) == current_by_records(path, job_id), job_id
        for status in ("running", "completed"):
            assert current(path, None, status) == current_by_records(path, None, status), status

    check()


def test_a_broken_line_in_the_middle_stops_current_naming_it(tmp_path: Path) -> None:
    rows = list(DEMO_LINES[:300])
    rows[100] = orjson.dumps(dict(DEMO_RECORDS[99], inputs={"prompt": "x" * 3000}))
    rows[200] = orjson.dumps(dict(DEMO_RECORDS[199], ts="2026-11-01T00:00:00+00:00"))  # settled by orjson
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    for job_id in (None, DEMO_RECORDS[99]["id"], DEMO_RECORDS[199]["id"], DEMO_RECORDS[299]["id"]):
        assert current(path, job_id) == current_by_records(path, job_id)
    path.write_bytes(b"\n".join([*rows[:150], b"not json", *rows[150:]]) + b"\n")
    broken = current(path, None)
    assert broken[0] == "error" and broken[1] == "151:1"
