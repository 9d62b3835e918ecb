"""The audit core without pytest in the loop: the ledger pass, incremental state, secrets, checkpoints."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from checkout import ROOT
from made_keys import pem_header, token

from gpuharness.audit import checkpoint as cp
from gpuharness.audit import run_audit
from gpuharness.core.clock import parse_ts
from gpuharness.core.secrets import PATTERNS, find_secrets, shown

DEMO = ROOT / "fixtures" / "demo" / ".pi" / "gpu"
NOW = parse_ts("2026-11-30T18:10:00Z")


@pytest.fixture
def reg(tmp_path: Path) -> Path:
    target = tmp_path / "reg"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("audit", "*.lock"))
    return target


def lines(registry: Path) -> list[bytes]:
    return (registry / "jobs.jsonl").read_bytes().splitlines(keepends=True)


def break_ledger(registry: Path) -> None:
    """A torn line in the middle, a schema error, a non-correction after a terminal line, a wrong cost."""
    raw = lines(registry)
    raw[40] = raw[40][:30] + b"\n"
    records = [orjson.loads(r) for r in raw[:200] if r.startswith(b"{") and r.endswith(b"}\n")]
    done = next(r for r in records if r["status"] == "completed")
    raw.append(orjson.dumps(dict(done, cost_usd="free")) + b"\n")
    raw.append(orjson.dumps(dict(done, status="running", ts="2026-11-30T17:00:00.000Z")) + b"\n")
    raw.append(orjson.dumps(dict(done, id="J-pricey", cost_usd=9.0)) + b"\n")
    for odd in ("J-1", 'J-"quoted"', "J-é", "J-0000001x"):  # other lengths, an escape, non-ASCII
        raw.append(orjson.dumps(dict(done, id=odd, status="running")) + b"\n")
        raw.append(orjson.dumps(dict(done, id=odd)) + b"\n")
        raw.append(orjson.dumps(dict(done, id=odd, status="running")) + b"\n")
    (registry / "jobs.jsonl").write_bytes(b"".join(raw))


def summary(run: object) -> dict[str, object]:
    state = run.state  # type: ignore[attr-defined]
    return {"counts": dict(run.counts), "lines": state.line_count,  # type: ignore[attr-defined]
            "findings": sorted(f.line() for fs in run.findings.values() for f in fs),  # type: ignore[attr-defined]
            "spend": {g: state.rounded(g) for g in cp.GROUPINGS}, "jobs": state.job_count,
            "open": state.open_jobs, "unsynced": state.unsynced, "synced_max": state.synced_max,
            "dep_lines": state.dep_lines, "last": state.last_ts}


def job_states(run: object) -> dict[str, list[object]]:
    states: dict[str, list[object]] = {}
    for name in run.state.job_files:  # type: ignore[attr-defined]
        for line in Path(name).read_bytes().splitlines():
            entry = orjson.loads(line)
            states[entry[0]] = entry[1:]
    return states


def test_the_pass_reports_each_broken_line_and_each_rule_once(reg):
    break_ledger(reg)
    run = run_audit(reg, NOW, use_checkpoint=False)
    again = run_audit(reg, NOW, use_checkpoint=False)
    assert len(run.state.job_files) == 1
    assert summary(again) == summary(run)
    assert job_states(again) == job_states(run)
    assert run.count("ledger:torn") == 1
    assert run.count("ledger:schema") == 1
    assert run.count("job:only-corrections-after-terminal") == 5
    assert run.count("spend:per-job") == 1


def test_lines_the_struct_refuses_are_settled_by_the_schema(reg):
    break_ledger(reg)
    extra = [orjson.loads(r) for r in lines(reg)[:60] if r.startswith(b"{") and r.endswith(b"}\n")]
    with open(reg / "jobs.jsonl", "ab") as handle:  # lines the Struct refuses but the schema accepts, and others
        for record in extra[:20]:
            handle.write(orjson.dumps(dict(record, ts=record["ts"].replace("Z", "+00:00"))) + b"\n")
            handle.write(b'{"id":"' + record["id"].encode() + b'","id":"J-dup",' + orjson.dumps(record)[1:] + b"\n")
            handle.write(orjson.dumps(dict(record, status="failed", error="", correction=True, reason="x")) + b"\n")
            handle.write(orjson.dumps(dict(record, inputs={"note": "tab\there"}, artifacts=[
                {"name": "a.png", "synced_at": None}, {"name": "b.png", "discarded": True}])) + b"\n")
            handle.write(orjson.dumps(dict(record, attempt=1.0, extra_field={"x": 1})) + b"\n")
    run = run_audit(reg, NOW, use_checkpoint=False)
    assert run.count("job:only-corrections-after-terminal") >= 5 and run.count("ledger:torn") == 1
    assert run.count("ledger:schema") == 1
    assert run.count("job:failed-has-error") == 20


def test_incremental_audit_reaches_the_state_of_a_full_audit(reg):
    policy = orjson.loads((reg / "policy.json").read_bytes())
    policy["max_idle_minutes"] = 100_000  # the truncated ledger leaves the live deployments idle for days
    (reg / "policy.json").write_bytes(orjson.dumps(policy))
    path = reg / "jobs.jsonl"
    whole = path.read_bytes()
    raw = lines(reg)
    path.write_bytes(b"".join(raw[:-300]))
    first = run_audit(reg, NOW)
    assert first.passed and not first.incremental
    assert cp.write(cp.checkpoint_path(reg), first.checkpoint_document(), first.previous)
    path.write_bytes(whole)
    incremental = run_audit(reg, NOW)
    assert incremental.incremental and incremental.lines_validated == 300
    full = run_audit(reg, NOW, use_checkpoint=False)
    assert summary(incremental) == summary(full)
    assert cp.write(cp.checkpoint_path(reg), incremental.checkpoint_document(), incremental.previous)
    reloaded = cp.load(cp.checkpoint_path(reg))
    assert reloaded is not None and reloaded.state.job_count == full.state.job_count
    assert len(reloaded.state.job_files) == 2
    assert not list(Path(name) for name in reloaded.state.job_files if "/" in name)


def test_policy_change_forces_a_full_pass(reg):
    first = run_audit(reg, NOW)
    cp.write(cp.checkpoint_path(reg), first.checkpoint_document(), first.previous)
    policy = orjson.loads((reg / "policy.json").read_bytes())
    policy["per_job_usd"] = 0.2
    (reg / "policy.json").write_bytes(orjson.dumps(policy))
    again = run_audit(reg, NOW)
    assert not again.incremental
    assert again.count("spend:per-job") > 0


def test_full_rebaseline_removes_the_job_files_it_no_longer_names(reg):
    path = reg / "jobs.jsonl"
    whole = path.read_bytes()
    path.write_bytes(b"".join(lines(reg)[:-10]))
    first = run_audit(reg, NOW)
    cp.write(cp.checkpoint_path(reg), first.checkpoint_document(), first.previous)
    path.write_bytes(whole)
    incremental = run_audit(reg, NOW)
    cp.write(cp.checkpoint_path(reg), incremental.checkpoint_document(), incremental.previous)
    assert len(list((reg / "audit").glob("jobs-*.jsonl"))) == 2
    policy = orjson.loads((reg / "policy.json").read_bytes())
    policy["daily_usd"] = 11.0
    (reg / "policy.json").write_bytes(orjson.dumps(policy))
    full = run_audit(reg, NOW)
    assert not full.incremental
    cp.write(cp.checkpoint_path(reg), full.checkpoint_document(), full.previous)
    names = sorted(p.name for p in (reg / "audit").glob("jobs-*.jsonl"))
    assert names == cp.load(cp.checkpoint_path(reg)).state.job_files  # type: ignore[union-attr]
    assert len(names) == 1


def test_secret_finder_reports_each_kind_redacted():
    # the fake secrets are made here, per run, so no secret-shaped value is committed
    runpod, bearer, password, api_key = (token(n).encode() for n in (24, 20, 7, 32))
    text = (b'{"a": "rpa_' + runpod + b'"}\n'
            b"Authorization: Bearer " + bearer + b"\n" + pem_header("rsa") + b"\n"
            b'{"password": "' + password + b'"}\n'
            b"url: /x?api_key=" + api_key + b"\n")
    hits = list(find_secrets(text))
    assert [h.kind for h in hits] == ["RunPod API key", "bearer token", "private key", "password", "API key"]
    assert all(value[4:].decode() not in h.shown for h in hits for value in (runpod, bearer, password, api_key))
    assert shown(b"rpa_" + token(8).encode()) == "rpa_… (12 chars)"


def test_secret_finder_ignores_placeholders_and_variable_names():
    text = (b"Authorization: Bearer REDACTED\n"
            b'{"credential_env": "RUNPOD_API_KEY", "key_prefix": "rpa_"}\n'
            b'{"password": "***"}\n'
            b"api_key=${VAST_API_KEY}\n"
            b'{"sha256": "' + b"a" * 64 + b'"}\n')
    assert list(find_secrets(text)) == []


def test_secret_prefilter_drops_no_line_that_a_pattern_matches():
    # reference: every pattern run over every line. The needle prefilter (needles looked for after deleting the
    # bytes no needle holds) must find the same secrets: mixed case, between other text, at the edges of lines and
    # of data[:limit], and not fooled by letters the deletion brings together
    pieces = [b"rpa_" + token(24).encode(), pem_header("ec"), b"BeArEr " + b"t0k" * 6,
              pem_header("openssh").replace(b"OPENSSH", b"OPENSSH ENCRYPTED LONG NAME"),
              b"x-instance_api_key: " + b"i" * 16,
              b'"API_KEY": "' + b"k" * 20 + b'"', b"Client-Secret=" + b"s" * 18, b'"PassWd":"' + b"p" * 9 + b'"',
              b"access_token: " + b"z" * 17, b"Password=" + b"w" * 8, b"a.p.i_key=" + b"x" * 20, b"to ken pa ss"]
    filler = [b"", b" ", b'{"seed": 12, "steps": 30}', b"xyz", b"a-p-i", b"t0-ken", b"\t"]
    data = b"\n".join(left + piece + right for piece in pieces for left in filler[:4] for right in filler[2:])
    data += b"\n" + pieces[0]  # and a last line without its newline
    expected: list[tuple[str, int]] = []
    offset = 0
    for line in data.split(b"\n"):
        expected.extend((kind, offset + m.start("value")) for kind, pattern in PATTERNS
                        for m in pattern.finditer(line))
        offset += len(line) + 1
    assert len(expected) >= 8 * 4 * 5
    assert [(h.kind, h.offset) for h in find_secrets(data)] == expected
    cut = data.rfind(b"\n") + 1
    assert [(h.kind, h.offset) for h in find_secrets(data, cut)] == [e for e in expected if e[1] < cut]


def test_a_leap_second_is_a_time_not_a_crash(reg):
    # date-time allows second 60 (RFC 3339) and datetime does not: the pass must read it, not die on it
    done = next(r for r in map(orjson.loads, lines(reg)) if r["status"] == "completed" and r.get("artifacts"))
    leap = dict(done, id="J-leap", started_at="2026-06-30T23:59:50.000Z", completed_at="2026-06-30T23:59:60.000Z",
                duration_s=11.0, cost_usd=round(11.0 * 0.59 / 3600, 6), ts="2026-06-30T23:59:60+00:00",
                artifacts=[{"name": "a.png", "synced_at": "2026-06-30T23:59:60Z"}])
    with open(reg / "jobs.jsonl", "ab") as handle:
        handle.write(orjson.dumps(leap) + b"\n")
    run = run_audit(reg, NOW, use_checkpoint=False)
    assert run.count("job:duration-agrees") == 0 and run.count("job:completed-after-started") == 0
    assert run.state.line_count == len(lines(reg))


def test_a_sha256_checkpoint_still_verifies_and_a_full_pass_records_blake3(reg):
    shutil.copytree(DEMO / "audit", reg / "audit")  # the committed demo checkpoint: version 2, sha256
    assert cp.load(cp.checkpoint_path(reg)).state.prefix_hash == "sha256"  # type: ignore[union-attr]
    again = run_audit(reg, NOW)
    assert again.passed and again.incremental and again.state.prefix_hash == "sha256"
    assert not cp.write(cp.checkpoint_path(reg), again.checkpoint_document(), again.previous)  # already attested
    raw = lines(reg)
    raw[5] = raw[5].replace(b'"queued"', b'"running"', 1) if b'"queued"' in raw[5] else raw[5].replace(b"0", b"1", 1)
    (reg / "jobs.jsonl").write_bytes(b"".join(raw))
    rewritten = run_audit(reg, NOW)
    assert rewritten.count("ledger:append-only") == 1
    assert "sha256" in rewritten.explain("ledger:append-only")
    full = run_audit(reg, NOW, use_checkpoint=False)
    ledger = full.checkpoint_document()["ledger"]
    assert ledger["prefix_hash"] == "blake3" and len(ledger["prefix_digest"]) == 64
