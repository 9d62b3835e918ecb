"""The ledger pass split between two processes (audit/ledger_split.py) judges a ledger exactly as one pass does:
the same findings in the same order (with the same example caps), counts, spend, open jobs, unsynced artifacts,
per-deployment facts and job states, wherever the cut falls, with a real forked child or without one."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from collections import defaultdict
from pathlib import Path
from secrets import token_hex
from typing import Any

import msgspec
import orjson
import pytest
from checkout import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuharness.audit import checkpoint as cp
from gpuharness.audit import ledger_split, run_audit
from gpuharness.audit.ledger_pass import PassContext, PassResult, scan
from gpuharness.core.clock import parse_ts

DEMO = ROOT / "fixtures" / "demo" / ".pi" / "gpu"
DEMO_LINES = (DEMO / "jobs.jsonl").read_bytes().splitlines()
DEMO_RECORDS = [orjson.loads(line) for line in DEMO_LINES]
RATES = {d["id"]: float(d["cost_hr"]) for d in orjson.loads((DEMO / "deployments.json").read_bytes())["deployments"]}
NOW = parse_ts("2026-11-30T18:10:00Z")
#: A fake credential value, assembled here so that no secret-shaped literal is committed.
TOKEN = token_hex(10)  # a bearer token, made per run


def verdict(result: PassResult, jobs_files: list[str]) -> dict[str, Any]:
    """Everything a pass decides, each rule's findings in their order, and the job states its files hold."""
    findings: dict[str, list[tuple[int, str]]] = defaultdict(list)
    for found in result.findings:
        findings[found.rule.id].append((found.lineno, found.message))
    states: dict[str, list[Any]] = {}
    for name in jobs_files:
        for line in Path(name).read_bytes().splitlines():
            entry = orjson.loads(line)
            states[entry[0]] = entry[1:]
    decided = {"lines": result.lines, "new_jobs": result.new_jobs, "touched": result.touched,
               "findings": dict(findings), "counts": {rule.id: n for rule, n in result.counts.items()},
               "spend": {g: {k: round(v, 9) for k, v in sorted(b.items())} for g, b in sorted(result.spend.items())},
               "opened": result.opened, "closed": sorted(result.closed), "unsynced": result.unsynced,
               "resynced": sorted(result.resynced), "synced_max": result.synced_max, "dep_lines": result.dep_lines,
               "dep_examples": result.dep_examples, "last_ts": result.last_ts, "torn": result.torn, "states": states}
    return msgspec.json.decode(msgspec.json.encode(decided))  # as JSON: comparable with another process' print


def line_starts(data: bytes) -> list[int]:
    return [0] + [i + 1 for i, byte in enumerate(data) if byte == 0x0A and i + 1 < len(data)]


@st.composite
def ledgers(draw: st.DrawFn) -> bytes:
    """A slice of the demo ledger, then lines that make a cut matter: jobs continued, reopened after a terminal line,
    corrected (with and without a reason, and with no earlier line), moved to another (or an unknown) deployment,
    billed above the cap, left unsynced or resynced; broken lines, secrets, and sometimes a torn last line."""
    start = draw(st.integers(0, len(DEMO_LINES) - 30))
    rows = list(DEMO_LINES[start:start + draw(st.integers(5, 30))])
    for _ in range(draw(st.integers(0, 14))):
        record = dict(orjson.loads(draw(st.sampled_from(rows))))
        change = draw(st.sampled_from([
            {"status": "running"}, {"status": "failed", "error": None}, {"correction": True, "reason": "fix"},
            {"correction": True}, {"id": "J-new", "correction": True, "reason": "x"},
            {"deployment_id": "dep_unknown"}, {"deployment_id": "dep_vast_a100_01"}, {"cost_usd": 9.5},
            {"artifacts": [{"name": "out.png"}]}, {"artifacts": [{"name": "out.png", "discarded": True}]},
            {"artifacts": [{"name": "a.png", "synced_at": "2026-11-30T17:59:00.000Z"}]},
            {"ts": record["ts"].replace("Z", "+00:00")}, {"inputs": {"prompt": "Bearer " + TOKEN}},
            {"completed_at": "2026-11-01T00:00:00.000Z"}, {"duration_s": 99999.0}]))
        rows.insert(draw(st.integers(0, len(rows))), orjson.dumps(dict(record, **change)))
    for _ in range(draw(st.integers(0, 2))):
        at = draw(st.integers(0, len(rows) - 1))
        rows[at] = draw(st.sampled_from([rows[at][:40], b"[1, 2]", b'{"id": "J-x"}', b"", rows[at] + rows[at]]))
    data = b"\n".join(rows) + b"\n"
    if draw(st.booleans()):
        data += DEMO_LINES[0][:50]
    return data


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(ledgers(), st.integers(1, 4), st.data())
def test_a_split_pass_judges_the_ledger_as_one_pass_does(tmp_path: Path, ledger: bytes, examples: int,
                                                        data: st.DataObject) -> None:
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(ledger)
    ctx = PassContext(str(path), RATES, 0.01, 0.02, 0.5, max_examples=examples)
    one_dir, two_dir = tmp_path / "one", tmp_path / "two"
    for directory in (one_dir, two_dir):
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir()
    single = scan(ctx, 0, len(ledger), None, one_dir / "jobs.jsonl")
    expected = verdict(single, single.jobs_files)
    starts = line_starts(ledger)
    for cut in data.draw(st.lists(st.sampled_from(starts[1:] or [len(ledger)]), min_size=1, max_size=4)):
        split = ledger_split.scan_split(ctx, len(ledger), cut, None, two_dir)
        assert verdict(split, split.jobs_files) == expected, cut


def big_ledger(tmp_path: Path) -> Path:
    """The demo ledger with jobs that straddle its middle, a secret and broken lines on both sides."""
    rows = list(DEMO_LINES)
    middle = len(rows) // 2
    done = next(r for r in DEMO_RECORDS[middle - 60:middle] if r["status"] == "completed")
    rows.insert(middle + 3, orjson.dumps(dict(done, status="running", ts="2026-11-30T17:00:00.000Z")))
    rows.insert(middle + 5, orjson.dumps(dict(done, correction=True, cost_usd=0.0, ts="2026-11-30T17:01:00.000Z")))
    rows.insert(middle - 5, orjson.dumps(dict(done, inputs={"note": "Bearer " + TOKEN})))
    rows.insert(10, rows[10][:30])
    rows.insert(middle + 40, b"not json")
    path = tmp_path / "jobs.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    return path


#: Run in a fresh interpreter, which runs one thread (a test process may hold others, and then no child is forked):
#: split the ledger at argv[2] with a forked child (made to fail when argv[3] is "fail"), print the verdict; argv[4]
#: names the folders this module and its helpers import from.
SPLIT_IN_A_FRESH_PROCESS = r"""
import os, sys
from pathlib import Path
import orjson
sys.path[:0] = sys.argv[4].split(os.pathsep)
from test_ledger_split import RATES, verdict
from gpuharness.audit import ledger_split
from gpuharness.audit.ledger_pass import PassContext

path, cut, jobs_dir = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[1]).parent / "two"
jobs_dir.mkdir()
ctx = PassContext(str(path), RATES, 0.01, 0.02, 0.3)
parent, check_tail = os.getpid(), ledger_split.check_tail

def dies_in_the_child(*args):
    if os.getpid() != parent:
        raise MemoryError("the child ran out of memory")
    return check_tail(*args)

if sys.argv[3] == "fail":
    ledger_split.check_tail = dies_in_the_child
child = ledger_split.TailChild.start(ctx, cut, path.stat().st_size, jobs_dir)
assert child is not None and child.pid != parent, "no child was forked"
split = ledger_split.scan_split(ctx, path.stat().st_size, cut, child, jobs_dir)
print(orjson.dumps({"verdict": verdict(split, split.jobs_files),
                    "files": [Path(name).name for name in split.jobs_files]}).decode())
"""


def split_in_a_fresh_process(path: Path, how: str) -> dict[str, Any]:
    size = path.stat().st_size
    cut = size // 2 + 1 + path.read_bytes()[size // 2:].index(b"\n")
    done = subprocess.run([sys.executable, "-c", SPLIT_IN_A_FRESH_PROCESS, str(path), str(cut), how,
                           os.pathsep.join([str(Path(__file__).parent), str(ROOT / "tests")])],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    printed: dict[str, Any] = orjson.loads(done.stdout)
    return printed


def single_pass(path: Path) -> dict[str, Any]:
    ctx = PassContext(str(path), RATES, 0.01, 0.02, 0.3)
    (path.parent / "one").mkdir()
    single = scan(ctx, 0, path.stat().st_size, None, path.parent / "one" / "jobs.jsonl")
    return verdict(single, single.jobs_files)


def test_a_forked_child_checks_the_second_half_and_its_part_is_joined(tmp_path: Path) -> None:
    path = big_ledger(tmp_path)
    printed = split_in_a_fresh_process(path, "ok")
    expected = single_pass(path)
    assert printed["verdict"] == expected
    assert printed["files"] == [ledger_split.HEAD_JOBS, ledger_split.TAIL_JOBS]
    assert set(expected["counts"]) >= {"ledger:torn", "secrets:ledger", "job:only-corrections-after-terminal"}


def test_when_the_child_fails_the_parent_checks_the_second_part_itself(tmp_path: Path) -> None:
    path = big_ledger(tmp_path)
    assert split_in_a_fresh_process(path, "fail")["verdict"] == single_pass(path)


def test_no_child_is_forked_beside_other_threads(tmp_path: Path) -> None:
    path = big_ledger(tmp_path)
    ctx = PassContext(str(path), RATES, 0.01, 0.02, 0.3)
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert ledger_split.TailChild.start(ctx, 1, path.stat().st_size, tmp_path) is None
    finally:
        stop.set()
        other.join()


def test_a_split_full_audit_reaches_the_state_of_a_single_pass_and_audits_on_incrementally(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reg = tmp_path / "reg"
    shutil.copytree(DEMO, reg, ignore=shutil.ignore_patterns("audit", "*.lock"))
    path = reg / "jobs.jsonl"
    whole = path.read_bytes()
    path.write_bytes(b"".join(whole.splitlines(keepends=True)[:-100]))
    single = run_audit(reg, NOW, use_checkpoint=False)
    monkeypatch.setattr(ledger_split, "SPLIT_MIN_BYTES", 1)
    split = run_audit(reg, NOW)
    assert len(split.state.job_files) == 2 and dict(split.counts) == dict(single.counts)
    for name in ("line_count", "byte_length", "prefix_digest", "job_count", "dep_lines", "dep_examples", "last_ts",
                 "open_jobs", "unsynced", "synced_max"):
        assert getattr(split.state, name) == getattr(single.state, name), name
    assert {g: split.state.rounded(g) for g in cp.GROUPINGS} == {g: single.state.rounded(g) for g in cp.GROUPINGS}
    assert cp.write(cp.checkpoint_path(reg), split.checkpoint_document(), split.previous)
    path.write_bytes(whole)
    incremental = run_audit(reg, NOW)
    full = run_audit(reg, NOW, use_checkpoint=False)
    assert incremental.incremental and incremental.lines_validated == 100
    assert incremental.state.open_jobs == full.state.open_jobs and dict(incremental.counts) == dict(full.counts)
    assert {g: incremental.state.rounded(g) for g in cp.GROUPINGS} == {g: full.state.rounded(g) for g in cp.GROUPINGS}
