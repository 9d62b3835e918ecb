"""Duplicate keys: `{"status": "destroyed", "status": "ready"}` is ambiguous (JSON parsers keep one silently), so a
state file, a ledger line or a journal line that repeats a key is refused with the place, exit 2, nothing changed."""

from __future__ import annotations

import json
import subprocess
import sys

import orjson
import pytest
from checkout import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.core.errors import UserError
from gpuharness.core.json_text import first_duplicate, line_duplicate, loads
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry


def gpuharness(registry: Registry, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(registry.root)],
                          capture_output=True, text=True, timeout=60)


def one_line_refusal(done: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    for fragment in fragments:
        assert fragment in done.stderr, done.stderr


def test_a_deployment_with_a_doubled_status_is_refused_with_its_place(registry):
    path = registry.path("deployments.json")
    text = path.read_text().replace('"status": "ready"', '"status": "destroyed", "status": "ready"')
    path.write_text(text)
    for command in (("status",), ("validate",), ("destroy", "dep_a", "--confirm", "dep_a")):
        one_line_refusal(gpuharness(registry, *command), f"{path}:$.deployments[0].status", 'duplicate key "status"')
    assert path.read_text() == text


def test_a_ledger_line_with_a_doubled_cost_is_refused_not_summed(registry, job_line):
    line = orjson.dumps(job_line("J-000001", "completed", cost_usd=0.25)).decode()
    doubled = line.replace('"cost_usd":0.25', '"cost_usd":9999.0,"cost_usd":0.25')
    registry.ledger_path.write_text(line.replace("J-000001", "J-000000") + "\n" + doubled + "\n")
    before = registry.ledger_path.read_bytes()
    for command in (("spend",), ("ledger", "show"), ("validate",)):
        done = gpuharness(registry, *command)
        one_line_refusal(done, f"{registry.ledger_path}:2:", 'duplicate key "cost_usd"')
        assert "9,999" not in done.stdout
    assert registry.ledger_path.read_bytes() == before


def test_a_repeat_nested_in_a_ledger_line_is_found_and_a_quote_colon_in_a_string_is_not(registry, job_line):
    ledger = Ledger(registry.ledger_path)
    honest = dict(job_line("J-1", "completed"), inputs={"prompt": 'he said "a": b, "c" :d', "seed": 1})
    registry.ledger_path.write_bytes(orjson.dumps(honest) + b"\n" + json.dumps(honest, indent=None).encode() + b"\n")
    assert [r["inputs"] for r in ledger.records()] == [honest["inputs"]] * 2
    nested = orjson.dumps(honest).replace(b'"seed":1', b'"seed":1,"seed":2')
    registry.ledger_path.write_bytes(nested + b"\n")
    with pytest.raises(UserError) as refused:
        list(ledger.records())
    assert refused.value.place == "1:1" and "$.inputs" in refused.value.what
    with pytest.raises(UserError):
        ledger.current("J-1")  # the job's current line


def test_the_current_line_lookup_refuses_a_repeat_in_a_line_it_passes_over(registry, job_line):
    """current() reads every line with a Struct (which keeps the last of a repeated key); a repeat in a line that
    is not the job's current one is still refused, at its line, as records() refuses it."""
    first = orjson.dumps(job_line("J-1", "running")).replace(b'"gpu":', b'"gpu":"A100","gpu":')
    second = orjson.dumps(job_line("J-1", "completed"))
    registry.ledger_path.write_bytes(first + b"\n" + second + b"\n")
    ledger = Ledger(registry.ledger_path)
    for lookup in (lambda: ledger.current("J-1"), lambda: ledger.current(), lambda: list(ledger.records())):
        with pytest.raises(UserError) as refused:
            lookup()
        assert refused.value.place == "1:1" and 'duplicate key "gpu"' in refused.value.what


def test_a_journal_line_with_a_repeated_key_is_refused(registry):
    registry.journal_path.write_text('{"ts": "2026-12-01T10:00:00Z", "deployment": "dep_a", "to": "ready", '
                                     '"to": "destroyed"}\n')
    one_line_refusal(gpuharness(registry, "validate"), f"{registry.journal_path}:1:", 'duplicate key "to"')


@pytest.mark.parametrize(("text", "place"), [('{"a": 1, "a": 1}', "$.a"), ('{"x": [{"b": 1}, {"b": 2, "b": 3}]}',
                                                                           "$.x[1].b"),
                                             ('{"a": {"a": 1, "b": {"c": 1, "c": 1}}}', "$.a.b.c")])
def test_a_repeat_anywhere_in_a_state_document_names_its_place(tmp_path, text, place):
    with pytest.raises(UserError) as refused:
        loads(text, tmp_path / "x.json")
    assert refused.value.place == place


keys = st.text(alphabet='ab"\\: \t', min_size=1, max_size=3)
values = st.recursive(st.none() | st.integers(-5, 5) | st.text(alphabet='ab":\\ \t{}', max_size=6),
                      lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3),
                      max_leaves=8)


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(keys, values, min_size=1, max_size=5), st.booleans(), st.sampled_from(["orjson", "spaced",
                                                                                              "padded"]))
def test_the_cheap_line_check_finds_exactly_the_repeats(record, repeat, style):
    """Whatever the spacing and the strings hold, line_duplicate says a line repeats a key iff it does."""
    if style == "orjson":
        raw = orjson.dumps(record)
    elif style == "spaced":
        raw = json.dumps(record).encode()
    else:
        raw = json.dumps(record, separators=(" , ", " : ")).encode()
    if repeat:
        first = next(iter(record))
        raw = b"{" + json.dumps(first).encode() + b" :0," + raw[1:]
    assert (line_duplicate(raw, orjson.loads(raw)) is not None) == repeat
    assert (first_duplicate(raw) is not None) == repeat


def test_our_own_lines_take_the_cheap_path(job_line, monkeypatch):
    """A line written by the ledger's writer never needs the exact (stdlib) parse."""
    import gpuharness.core.json_text as json_text

    def refuse(_: object) -> None:
        raise AssertionError("the exact check ran")

    monkeypatch.setattr(json_text, "first_duplicate", refuse)
    for record in (job_line("J-1", "completed"), dict(job_line("J-2", "failed"), inputs={"p": "a cat", "n": [1]})):
        raw = orjson.dumps(record)
        assert line_duplicate(raw, orjson.loads(raw)) is None


def test_fixtures_hold_no_repeated_keys():
    root = ROOT / "fixtures"
    for path in root.rglob("*.jsonl"):
        for raw in path.read_bytes().splitlines():
            try:
                record = orjson.loads(raw)
            except orjson.JSONDecodeError:
                continue
            assert line_duplicate(raw, record) is None, path
