"""Every audit check fails on a registry broken the way it guards against, with an actionable message.

Each test copies the demo registry to tmp, breaks one thing, runs checks/audit with pytester, and asserts
which checks failed (and only those) and what the failure says.
"""

from __future__ import annotations

import json
from pathlib import Path
from secrets import token_hex
from textwrap import indent
from typing import Any

import hypothesis  # noqa: F401  (pytester restores sys.modules after each run; its plugin imports this at the end)
import orjson
import pytest
from checkout import ROOT
from made_keys import private_key_pem

CHECKS = ROOT / "checks" / "audit"
DEMO = ROOT / "fixtures" / "demo" / ".pi" / "gpu"
#: A time shortly after the demo ledger ends (the live deployments' open jobs keep them busy anyway).
DEMO_NOW = "2026-11-30T18:10:00Z"


def audit(pytester: pytest.Pytester, registry: Path, *extra: str) -> pytest.RunResult:
    return pytester.runpytest(str(CHECKS), "--registry", str(registry), "-p", "no:html", "-p", "no:cacheprovider",
                              "-rfs", "--tb=short", *extra)


def failed(result: pytest.RunResult) -> list[str]:
    """The failed test ids (function[param]) from the short summary."""
    names = []
    for line in result.outlines:
        if line.startswith("FAILED "):
            node = line.split(" ", 2)[1]
            names.append(node.split("::")[-1])
    return sorted(names)


def says(result: pytest.RunResult, patterns: list[str]) -> None:
    """fnmatch the output, with [ and ] taken literally (they are JSON paths and test ids here)."""
    result.stdout.fnmatch_lines([p.replace("[", "[[]") for p in patterns])


def load(path: Path) -> Any:
    return json.loads(path.read_text())


def save(path: Path, doc: Any) -> None:
    path.write_text(json.dumps(doc, indent=2))


def ledger(registry: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in (registry / "jobs.jsonl").read_bytes().splitlines()]


def append(path: Path, *records: dict[str, Any]) -> None:
    with open(path, "ab") as handle:
        for record in records:
            handle.write(orjson.dumps(record) + b"\n")


def edit_deployment(registry: Path, dep_id: str, **fields: Any) -> None:
    doc = load(registry / "deployments.json")
    for item in doc["deployments"]:
        if item["id"] == dep_id:
            for key, value in fields.items():
                if value is ...:
                    item.pop(key, None)
                else:
                    item[key] = value
    save(registry / "deployments.json", doc)


def edit_policy(registry: Path, **fields: Any) -> None:
    doc = load(registry / "policy.json")
    doc.update(fields)
    save(registry / "policy.json", doc)


def last_line_of(registry: Path, predicate: Any) -> dict[str, Any]:
    return [r for r in ledger(registry) if predicate(r)][-1]


def completed_on(registry: Path, dep_id: str) -> dict[str, Any]:
    return last_line_of(registry, lambda r: r["deployment_id"] == dep_id and r["status"] == "completed")


def correction(record: dict[str, Any], **fields: Any) -> dict[str, Any]:
    fixed = dict(record, correction=True, reason="test correction", ts="2026-11-30T17:59:00.000Z")
    fixed.update(fields)
    return fixed


# --- the happy path and the checkpoint -----------------------------------------------------------------


def test_demo_registry_passes_the_whole_audit_and_writes_a_checkpoint(pytester, reg):
    result = audit(pytester, reg)
    assert failed(result) == []
    assert result.ret == 0
    checkpoint = json.loads((reg / "audit" / "checkpoint.json").read_text())
    assert checkpoint["ledger"]["line_count"] == len(ledger(reg))
    assert checkpoint["ledger"]["byte_length"] == (reg / "jobs.jsonl").stat().st_size
    assert "dep_h3_01" in checkpoint["deployment_ids"]
    assert checkpoint["aggregates"]["month"]["2026-11"] > 0
    states = [orjson.loads(line) for name in checkpoint["job_files"]
              for line in (reg / "audit" / name).read_bytes().splitlines()]
    assert {s[0] for s in states} == {r["id"] for r in ledger(reg)}
    assert checkpoint["job_count"] == len(states)


def test_failing_audit_writes_no_checkpoint(pytester, reg):
    edit_policy(reg, daily_usd=0.5)
    result = audit(pytester, reg)
    assert failed(result) == ["test_spend_within_policy_ceiling[daily]"]
    assert not (reg / "audit" / "checkpoint.json").exists()


def test_incremental_audit_validates_only_the_new_lines(pytester, reg):
    assert audit(pytester, reg).ret == 0
    job = completed_on(reg, "dep_vast_5090_03")
    append(reg / "jobs.jsonl", correction(job), correction(job, reason="second look"))
    result = audit(pytester, reg)
    assert failed(result) == []
    says(result, [f"gpuharness audit: {len(ledger(reg))} ledger lines, 2 validated (incremental)"])
    checkpoint = json.loads((reg / "audit" / "checkpoint.json").read_text())
    assert checkpoint["ledger"]["line_count"] == len(ledger(reg))


def test_unchanged_ledger_leaves_the_checkpoint_bytes_alone(pytester, reg):
    audit(pytester, reg)
    path = reg / "audit" / "checkpoint.json"
    before = path.read_bytes()
    result = audit(pytester, reg)
    assert failed(result) == []
    assert path.read_bytes() == before
    says(result, ["*already attests*unchanged*"])


def test_checkpoint_catches_a_rewritten_earlier_line(pytester, reg):
    audit(pytester, reg)
    count = len(ledger(reg))
    path = reg / "jobs.jsonl"
    data = path.read_bytes()
    path.write_bytes(data.replace(b"a lighthouse on a basalt cliff", b"a lighthouse on a granite cliff", 1))
    result = audit(pytester, reg)
    assert failed(result) == ["test_ledger_is_append_only_since_the_checkpoint"]
    says(result, [f"*jobs.jsonl:1-{count}: the first {count} lines*changed since the checkpoint*history was "
                                 "rewritten*append correction lines instead*"])


def test_checkpoint_catches_a_truncated_ledger(pytester, reg):
    audit(pytester, reg)
    path = reg / "jobs.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    result = audit(pytester, reg)
    assert "test_ledger_is_append_only_since_the_checkpoint" in failed(result)
    says(result, ["*history was truncated*"])


def test_checkpoint_catches_a_removed_deployment(pytester, reg):
    audit(pytester, reg)
    doc = load(reg / "deployments.json")
    doc["deployments"] = [d for d in doc["deployments"] if d["id"] != "dep_h3_01"]
    save(reg / "deployments.json", doc)
    result = audit(pytester, reg)
    assert failed(result) == ["test_every_job_deployment_is_in_deployments_json",
                              "test_every_journaled_deployment_is_in_deployments_json",
                              "test_no_deployment_vanished_since_the_checkpoint"]
    says(result, ["*deployment dep_h3_01: was in deployments.json at the checkpoint of *gone now*"
                                 "restore it*"])


def test_unreadable_checkpoint_fails_append_only_and_says_how_to_rebaseline(pytester, reg):
    (reg / "audit").mkdir()
    (reg / "audit" / "checkpoint.json").write_text("{not json")
    result = audit(pytester, reg)
    assert failed(result) == ["test_ledger_is_append_only_since_the_checkpoint"]
    says(result, ["*unreadable checkpoint*move it aside to re-baseline*"])


# --- state files and references ------------------------------------------------------------------------


def _break_providers(reg: Path) -> None:
    doc = load(reg / "providers.json")
    doc["providers"][0]["kind"] = "aws"
    save(reg / "providers.json", doc)


def _break_models(reg: Path) -> None:
    doc = load(reg / "models.json")
    doc["models"][0]["files"][0]["sha256"] = "not-a-digest"
    save(reg / "models.json", doc)


def _break_workflows(reg: Path) -> None:
    doc = load(reg / "workflows.json")
    del doc["workflows"][1]["test_generation"]
    save(reg / "workflows.json", doc)


def _break_connections(reg: Path) -> None:
    doc = load(reg / "connections.json")
    doc["connections"][0]["kind"] = "carrier-pigeon"
    save(reg / "connections.json", doc)


def _break_machines(reg: Path) -> None:
    doc = load(reg / "machines.json")
    doc["machines"][0]["observed_at"] = "yesterday"
    save(reg / "machines.json", doc)


def _break_deployments(reg: Path) -> None:
    edit_deployment(reg, "dep_h3_01", runtime="kubernetes")


def _break_policy(reg: Path) -> None:
    edit_policy(reg, require_shutdown_rule="yes")


def _journal_next(reg: Path) -> int:
    return len((reg / "transitions.jsonl").read_bytes().splitlines()) + 1


def _break_journal(reg: Path) -> None:
    append(reg / "transitions.jsonl", {"ts": "2026-11-30T17:00:00Z", "deployment": "dep_h3_01",
                                       "from": "destroyed", "to": "exploded"})


@pytest.mark.parametrize(("state_file", "breaker", "expected"), [
    ("providers.json", _break_providers, "*providers.json:$.providers[0].kind: 'aws' is not one of*"),
    ("models.json", _break_models, "*models.json:$.models[0].files[0].sha256: 'not-a-digest' does not match*"),
    ("workflows.json", _break_workflows, "*workflows.json:$.workflows[1]: 'test_generation' is a required*"),
    ("connections.json", _break_connections, "*connections.json:$.connections[0].kind: 'carrier-pigeon'*"),
    ("machines.json", _break_machines, "*machines.json:$.machines[0].observed_at: 'yesterday' is not a 'date-time'*"),
    ("deployments.json", _break_deployments, "*deployments.json:$.deployments[5].runtime: 'kubernetes'*"),
    ("policy.json", _break_policy, "*policy.json:$.require_shutdown_rule: 'yes' is not of type 'boolean'*"),
    ("transitions.jsonl", _break_journal, "*transitions.jsonl:*:$.to: 'exploded' is not one of*"),
])
def test_schema_check_fails_on_a_broken_state_file(pytester, reg, state_file, breaker, expected):
    breaker(reg)
    result = audit(pytester, reg)
    assert failed(result) == [f"test_state_file_matches_its_schema[{state_file}]"]
    says(result, [expected])


def test_missing_state_file_fails_its_schema_check_with_the_fix(pytester, reg):
    (reg / "models.json").unlink()
    result = audit(pytester, reg)
    assert failed(result) == ["test_state_file_matches_its_schema[models.json]"]
    says(result, ["*models.json: file not found; run `gpuharness init`*"])


def test_duplicate_provider_fails_the_unique_ids_check(pytester, reg):
    doc = load(reg / "providers.json")
    doc["providers"].append(dict(doc["providers"][1]))
    save(reg / "providers.json", doc)
    result = audit(pytester, reg)
    assert failed(result) == ["test_ids_are_unique[providers.json]"]
    says(result, ["*providers.json:$.providers[3]: duplicate name=vast (first at index 1)*"])


def test_job_on_an_unknown_deployment_fails(pytester, reg):
    job = completed_on(reg, "dep_rp_4090_01")
    append(reg / "jobs.jsonl", dict(job, id="J-ghost-1", deployment_id="dep_ghost"))
    result = audit(pytester, reg)
    assert failed(result) == ["test_every_job_deployment_is_in_deployments_json"]
    says(result, ["*deployment dep_ghost: 1 ledger line(s) (e.g. jobs J-ghost-1) run on a deployment that is not*"])


def test_journal_of_a_deleted_deployment_fails(pytester, reg):
    line = _journal_next(reg)
    append(reg / "transitions.jsonl", {"ts": "2026-11-03T10:00:00Z", "deployment": "dep_deleted", "from": None,
                                       "to": "provisioning"})
    result = audit(pytester, reg)
    assert failed(result) == ["test_every_journaled_deployment_is_in_deployments_json"]
    says(result, [f"*transitions.jsonl:{line}: transition of deployment dep_deleted*history was "
                                 "deleted*"])


# --- the ledger ----------------------------------------------------------------------------------------


def test_ledger_line_breaking_the_schema_fails(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    append(reg / "jobs.jsonl", correction(job, cost_usd="0.10"))
    result = audit(pytester, reg)
    assert failed(result) == ["test_ledger_lines_match_the_job_schema"]
    says(result, [f"*jobs.jsonl:{len(ledger(reg))}: job '{job['id']}' does not match the job schema: $.cost_usd: "
                                 "'0.10' is not of type*Append a correction line*"])


def test_torn_line_in_the_middle_fails(pytester, reg):
    path = reg / "jobs.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    lines[99] = lines[99][:57] + b"\n"
    path.write_bytes(b"".join(lines))
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_torn_line_before_the_end"]
    says(result, ["*jobs.jsonl:100: not valid JSON*torn or merged write in the middle*"])


def test_torn_last_line_is_only_a_warning(pytester, reg):
    line = len(ledger(reg)) + 1
    with open(reg / "jobs.jsonl", "ab") as handle:
        handle.write(b'{"id":"J-torn","deployment_id":"dep_vast_5')
    result = audit(pytester, reg)
    assert failed(result) == []
    says(result, [f"*warning: jobs.jsonl:{line}: torn last line (42 bytes without a newline)*"])


def test_completed_before_started_fails(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    append(reg / "jobs.jsonl", correction(job, completed_at="2026-11-24T00:00:00.000Z"))
    result = audit(pytester, reg)
    assert failed(result) == ["test_job_lines_are_consistent[completed-after-started]"]
    says(result, [f"*jobs.jsonl:{len(ledger(reg))}: job {job['id']}: completed_at 2026-11-24T00:00:00.000Z is *"
                                 "before started_at*append a correction with the real times*"])


def test_duration_disagreeing_with_the_times_fails(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    longer = round(job["duration_s"] + 100, 1)
    append(reg / "jobs.jsonl", correction(job, duration_s=longer, cost_usd=round(longer * 0.60 / 3600, 6)))
    result = audit(pytester, reg)
    assert failed(result) == ["test_job_lines_are_consistent[duration-agrees]"]
    says(result, [f"*job {job['id']}: duration_s {longer:g} but completed_at − started_at = *"])


def test_cost_not_matching_the_rate_fails(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    append(reg / "jobs.jsonl", correction(job, cost_usd=round(job["cost_usd"] * 3 + 0.01, 6)))
    result = audit(pytester, reg)
    assert failed(result) == ["test_job_lines_are_consistent[cost-matches-rate]"]
    says(result, [f"*job {job['id']}: cost_usd * but duration_s * × cost_hr 0.6 / 3600 = *"
                                 "fix the rate in deployments.json or append a correction*"])


def test_failed_job_without_error_fails(pytester, reg):
    failed_line = last_line_of(reg, lambda r: r["status"] == "failed")
    append(reg / "jobs.jsonl", correction(failed_line, error=None))
    result = audit(pytester, reg)
    assert failed(result) == ["test_job_lines_are_consistent[failed-has-error]"]
    says(result, [f"*job {failed_line['id']} failed without an error*"])


def test_non_correction_after_a_terminal_line_fails(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    running = {k: v for k, v in job.items() if k not in ("completed_at", "duration_s", "cost_usd", "artifacts")}
    append(reg / "jobs.jsonl", dict(running, status="running", ts="2026-11-30T17:59:00.000Z"))
    result = audit(pytester, reg)
    assert failed(result) == ["test_job_lines_are_consistent[only-corrections-after-terminal]"]
    says(result, [f"*jobs.jsonl:{len(ledger(reg))}: job {job['id']} is already completed; only a correction*"])


# --- spend ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("rule", "policy", "expected"), [
    ("per-job", {"per_job_usd": 0.2}, "*job J-*: billed $0.2* > per_job_usd $0.20 (deployment *"),
    ("daily", {"daily_usd": 2.0}, "*day 2026-11-* (UTC): billed $* (jobs $*, idle $*) > daily_usd $2.00 (over by $*"),
    ("monthly", {"monthly_usd": 30.0}, "*month 2026-11 (UTC): billed $1,2* (jobs $36.*) > monthly_usd $30.00*"),
    ("live-burn", {"max_cost_hr": 1.0}, "*live burn $1.29/hr > max_cost_hr $1.00/hr: dep_vast_5090_03 $0.60/hr*"),
    ("concurrent", {"max_concurrent_deployments": 1}, "*2 live deployments > max_concurrent_deployments 1*"),
])
def test_spend_beyond_a_ceiling_fails(pytester, reg, rule, policy, expected):
    edit_policy(reg, **policy)
    result = audit(pytester, reg)
    assert failed(result) == [f"test_spend_within_policy_ceiling[{rule}]"]
    says(result, [expected])


#: a deployment of the demo registry with fields changed (... removes one) -> the one check that fails, and its line
BROKEN_DEPLOYMENTS = [
    pytest.param("dep_rp_h100_01", {"provider": "lambda"}, "test_every_deployment_provider_is_in_providers_json",
                 "*deployment dep_rp_h100_01: provider 'lambda' is not in providers.json*",
                 id="a-provider-absent-from-providers-json"),
    pytest.param("dep_h3_01", {"destroyed_at": ...}, "test_destroyed_deployment_keeps_destroyed_at[dep_h3_01]",
                 "*deployment dep_h3_01: status is destroyed but destroyed_at is missing*",
                 id="destroyed-without-destroyed-at"),
    pytest.param("dep_rp_4090_04", {"destroyed_at": "2026-11-30T12:00:00Z"},
                 "test_destroyed_deployment_keeps_destroyed_at[dep_rp_4090_04]",
                 "*has destroyed_at 2026-11-30T12:00:00Z but status running*", id="live-with-destroyed-at"),
    pytest.param("dep_rp_4090_04", {"shutdown_rule": None},
                 "test_live_paid_deployment_has_a_shutdown_rule[dep_rp_4090_04]",
                 "*deployment dep_rp_4090_04: live at $0.69/hr with no shutdown_rule*",
                 id="live-and-paid-without-a-shutdown-rule"),
    pytest.param("dep_rp_4090_04", {"health": None},
                 "test_ready_only_after_a_passed_test_generation[dep_rp_4090_04]",
                 "*deployment dep_rp_4090_04: was ready without health evidence of a passed test generation*"
                 "pytest checks/health --gpu-mode live --deployment dep_rp_4090_04*",
                 id="ready-without-test-generation-evidence"),
    pytest.param("dep_vast_5090_03", {"health": {"test_generation": "passed", "at": "2026-12-01T00:00:00.000Z"}},
                 "test_ready_only_after_a_passed_test_generation[dep_vast_5090_03]",
                 "*health evidence taken at 2026-12-01T00:00:00.000Z, after ready_at*ready came before its proof*",
                 id="ready-before-its-evidence"),
    pytest.param("dep_vast_5090_03", {"status": "stopped"}, "test_status_matches_its_journal[dep_vast_5090_03]",
                 "*deployment dep_vast_5090_03: status is stopped in deployments.json but its journal ends at "
                 "running*", id="status-changed-without-a-journal-entry"),
    pytest.param("dep_rp_4090_04", {"shutdown_rule": {"idle_minutes": 20, "deadline": "2026-11-30T12:00:00Z"}},
                 "test_live_paid_deployment_is_within_its_stop_condition[dep_rp_4090_04]",
                 "*deployment dep_rp_4090_04: still live 6.2 h past its deadline 2026-11-30T12:00:00Z at "
                 "$0.69/hr*destroy it*", id="live-past-its-deadline"),
    pytest.param("dep_vast_5090_03", {"shutdown_rule": {"idle_minutes": 20, "max_hours": 24}},
                 "test_live_paid_deployment_is_within_its_stop_condition[dep_vast_5090_03]",
                 "*deployment dep_vast_5090_03: live for * h > its max_hours 24 at $*/hr*raise max_hours*",
                 id="live-past-its-max-hours"),
]


@pytest.mark.parametrize(("dep_id", "fields", "check", "message"), BROKEN_DEPLOYMENTS)
def test_a_deployment_record_broken_one_way_fails_its_one_check(pytester, reg, dep_id, fields, check, message):
    edit_deployment(reg, dep_id, **fields)
    result = audit(pytester, reg)
    assert failed(result) == [check]
    says(result, [message])


# --- history -------------------------------------------------------------------------------------------


def test_artifact_synced_after_destroy_fails(pytester, reg):
    job = completed_on(reg, "dep_h3_01")
    late = [dict(job["artifacts"][0], synced_at="2026-11-28T00:00:00.000Z")]
    append(reg / "jobs.jsonl", correction(job, artifacts=late))
    result = audit(pytester, reg)
    assert failed(result) == ["test_artifacts_synced_before_destroy[dep_h3_01]"]
    says(result, [f"*job {job['id']}: artifacts synced at 2026-11-28T00:00:00.000Z, * s after deployment dep_h3_01 "
                  "was destroyed*"])


def test_artifact_never_synced_before_destroy_fails(pytester, reg):
    job = completed_on(reg, "dep_mc_a6000_01")
    unsynced = [{k: v for k, v in job["artifacts"][0].items() if k != "synced_at"}]
    append(reg / "jobs.jsonl", correction(job, artifacts=unsynced))
    result = audit(pytester, reg)
    assert failed(result) == ["test_artifacts_synced_before_destroy[dep_mc_a6000_01]"]
    says(result, [f"*job {job['id']}: artifact '{unsynced[0]['name']}' was never synced*"
                                 "record discarded: true*"])


def test_discarded_artifact_needs_no_sync(pytester, reg):
    job = completed_on(reg, "dep_mc_a6000_01")
    discarded = [{"name": job["artifacts"][0]["name"], "discarded": True}]
    append(reg / "jobs.jsonl", correction(job, artifacts=discarded))
    assert failed(audit(pytester, reg)) == []


def test_job_left_running_on_a_destroyed_deployment_fails(pytester, reg):
    job = completed_on(reg, "dep_rp_l40s_01")
    append(reg / "jobs.jsonl", dict(job, id="J-orphan", status="running", completed_at=None, duration_s=None,
                                    cost_usd=None, artifacts=[]))
    result = audit(pytester, reg)
    assert failed(result) == ["test_artifacts_synced_before_destroy[dep_rp_l40s_01]"]
    says(result, ["*job J-orphan: still open (queued or running) on destroyed deployment dep_rp_l40s_01*"])


# --- shutdown ------------------------------------------------------------------------------------------


def test_live_paid_deployment_without_an_owner_or_a_reason_fails(pytester, reg):
    edit_deployment(reg, "dep_rp_4090_04", owner=None, reason=...)
    edit_deployment(reg, "dep_vast_5090_03", reason=" ")
    result = audit(pytester, reg)
    assert failed(result) == ["test_live_paid_deployment_names_its_cleanup_owner_and_reason[dep_rp_4090_04]",
                              "test_live_paid_deployment_names_its_cleanup_owner_and_reason[dep_vast_5090_03]"]
    says(result, ["*deployment dep_rp_4090_04: live at $0.69/hr with no owner and no reason: a paid resource "
                  "needs a cleanup owner and a reason*"])
    says(result, ["*deployment dep_vast_5090_03: live at $0.6/hr with no reason*"])


def test_live_paid_deployment_whose_last_probe_saw_no_guard_fails(pytester, reg):
    doc = load(reg / "deployments.json")
    [record] = [d for d in doc["deployments"] if d["id"] == "dep_rp_4090_04"]
    edit_deployment(reg, "dep_rp_4090_04", health={**record["health"], "failed_at": "2026-11-30T17:00:00.000Z",
                                                   "failed_checks": ["shutdown_guard_armed"]})
    result = audit(pytester, reg)
    assert failed(result) == ["test_live_paid_deployment_had_its_guard_running[dep_rp_4090_04]"]
    says(result, ["*deployment dep_rp_4090_04: live at $0.69/hr with the shutdown rule 'idle 20 min' but its last "
                  "probe (2026-11-30T17:00:00.000Z) saw no guard running: only `gpuharness reap --apply` stops it "
                  "now; re-arm it with `gpuharness guard dep_rp_4090_04`, or destroy it*"])


def _close_open_job(reg: Path, dep_id: str) -> None:
    job = last_line_of(reg, lambda r: r["deployment_id"] == dep_id)
    assert job["status"] == "running"
    append(reg / "jobs.jsonl", dict(job, status="completed", completed_at="2026-11-30T18:00:00.000Z",
                                    duration_s=None, cost_usd=None, artifacts=[], ts="2026-11-30T18:00:00.000Z"))


def test_idle_live_deployment_fails(pytester, reg, monkeypatch):
    _close_open_job(reg, "dep_rp_4090_04")
    monkeypatch.setenv("GPUHARNESS_AUDIT_NOW", "2026-11-30T19:00:00Z")
    result = audit(pytester, reg)
    assert failed(result) == ["test_live_paid_deployment_is_not_idle[dep_rp_4090_04]"]
    says(result, ["*deployment dep_rp_4090_04: idle for 60 min * > max_idle_minutes 30 at $0.69/hr*"])


def test_recently_active_deployment_is_not_idle(pytester, reg, monkeypatch):
    _close_open_job(reg, "dep_rp_4090_04")
    monkeypatch.setenv("GPUHARNESS_AUDIT_NOW", "2026-11-30T18:10:00Z")
    assert failed(audit(pytester, reg)) == []


# --- secrets -------------------------------------------------------------------------------------------

RUNPOD_KEY = "rpa_" + token_hex(16)  # made per run: no key is committed


def test_api_key_in_the_registry_fails_and_is_shown_redacted(pytester, reg):
    doc = load(reg / "providers.json")
    doc["providers"][0]["notes"] = f"temporary key {RUNPOD_KEY}"
    save(reg / "providers.json", doc)
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_secret_in[registry]"]
    says(result, ["*providers.json:*: RunPod API key rpa_… (36 chars); revoke it*"])
    assert RUNPOD_KEY not in result.stdout.str()


def test_bearer_token_in_the_ledger_fails(pytester, reg):
    job = completed_on(reg, "dep_vast_5090_03")
    bearer = "sk-live-" + token_hex(10)  # made per run: no token is committed
    inputs = dict(job["inputs"], header="Authorization: Bearer " + bearer)
    append(reg / "jobs.jsonl", correction(job, inputs=inputs))
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_secret_in[ledger]"]
    says(result, [f"*jobs.jsonl:{len(ledger(reg))}: bearer token sk-l… (28 chars)*"])
    assert bearer[4:] not in result.stdout.str()


def test_private_key_in_cassettes_fails(pytester, reg):
    cassettes = pytester.path / "cassettes" / "http"
    cassettes.mkdir(parents=True)
    (cassettes / "launch.yaml").write_text("body: |\n" + indent(private_key_pem("openssh").decode(), "  "))
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_secret_in[cassettes]"]
    says(result, ["*cassettes/http/launch.yaml:2: private key*"])


def test_password_in_reports_fails(pytester, reg):
    reports = pytester.path / "reports"
    reports.mkdir()
    (reports / "old.html").write_text('<pre>{"username": "Ubuntu", "password": "s3cret-pass-123"}</pre>')
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_secret_in[reports]"]
    says(result, ["*reports/old.html:1: password s3cr… (15 chars)*"])


#: A key with none of the patterns' shapes: only its configured value gives it away.
VAST_KEY = token_hex(22)  # made per run: no key is committed


@pytest.mark.parametrize("where", ["error", "prompt"])
def test_configured_key_value_in_the_ledger_fails_naming_its_variable_never_the_value(pytester, reg, monkeypatch,
                                                                                      where):
    monkeypatch.setenv("VAST_API_KEY", VAST_KEY)  # providers.json names it as vast's credential_env
    job = completed_on(reg, "dep_vast_5090_03")
    if where == "error":
        line = correction(job, status="failed", error=f"HTTP 401 from vast: key {VAST_KEY} refused")
    else:
        line = correction(job, inputs=dict(job["inputs"], prompt=f"a cat, {VAST_KEY}"))
    append(reg / "jobs.jsonl", line)
    result = audit(pytester, reg)
    assert failed(result) == ["test_no_secret_in[ledger]"]
    says(result, [f"*jobs.jsonl:{len(ledger(reg))}: the value of $VAST_API_KEY (44 chars); revoke it*"])
    assert VAST_KEY[:8] not in result.stdout.str() + result.stderr.str()


def test_scrubbed_placeholders_are_not_secrets(pytester, reg):
    cassettes = pytester.path / "cassettes"
    cassettes.mkdir()
    (cassettes / "c.yaml").write_text("Authorization: Bearer REDACTED\nurl: /graphql?api_key=REDACTED\n"
                                      "credential_env: RUNPOD_API_KEY\n")
    assert failed(audit(pytester, reg)) == []


def test_missing_registry_errors_with_the_fix(pytester, reg):
    result = audit(pytester, pytester.path / "nowhere")
    result.stderr.fnmatch_lines(["ERROR: *registry */nowhere not found: pass --registry DIR*gpuharness init*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    said = [line for line in result.outlines + result.errlines if "not found" in line]
    assert len(said) == 1, result.outlines + result.errlines  # one line, not one error per check


@pytest.mark.parametrize("where", ["args", "collected"])
def test_missing_registry_is_one_line_however_the_audit_is_named(pytester, reg, where):
    """Named on the command line, or collected from a parent folder (checks/), the audit refuses once."""
    target = CHECKS if where == "args" else CHECKS.parent
    result = pytester.runpytest(str(target), "--registry", str(pytester.path / "nowhere"), "-p", "no:html",
                                "-p", "no:cacheprovider", "--ignore", str(CHECKS.parent / "health"),
                                "--ignore", str(CHECKS.parent / "plan"))
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert len([line for line in result.outlines + result.errlines if "not found" in line]) == 1


def test_under_xdist_the_controller_writes_the_checkpoint(pytester, reg):
    result = audit(pytester, reg, "-n", "2")
    assert failed(result) == []
    says(result, ["*audit checkpoint written: *checkpoint.json (2003 lines*"])
    assert (reg / "audit" / "checkpoint.json").is_file()


def test_a_partial_audit_writes_no_checkpoint(pytester, reg):
    result = audit(pytester, reg, "-k", "spend")
    assert result.ret == 0
    says(result, ["*audit checkpoint not written: only part of the audit ran*"])
    assert not (reg / "audit").exists()


def test_unknown_field_is_a_warning_not_a_failure(pytester, reg):
    edit_deployment(reg, "dep_h3_01", colour="teal")
    result = audit(pytester, reg)
    assert failed(result) == []
    says(result, ["*gpuharness audit warning: deployments.json:$.deployments[5]: unknown field: *'colour'*"])


def test_deployment_option_audits_only_that_deployment_and_writes_no_checkpoint(pytester, reg):
    edit_deployment(reg, "dep_rp_4090_04", shutdown_rule=None)
    result = audit(pytester, reg, "--deployment", "dep_h3_01")
    assert failed(result) == []
    says(result, ["*audit checkpoint not written: only part of the audit ran*"])
    result = audit(pytester, reg, "--deployment", "dep_rp_4090_04")
    assert failed(result) == ["test_live_paid_deployment_has_a_shutdown_rule[dep_rp_4090_04]"]


def test_ready_straight_from_stopped_fails(pytester, reg):
    """Leaving stopped goes through health again: stopped -> ready skips the proof."""
    line = _journal_next(reg)
    append(reg / "transitions.jsonl", {"ts": "2026-11-30T18:01:00.000Z", "deployment": "dep_mc_a100_01",
                                       "provider": "massed", "target_id": None, "from": "stopped", "to": "ready"})
    result = audit(pytester, reg)
    # the journal check also sees it: stopped -> ready is not in the table, and the status is still stopped
    assert failed(result) == ["test_ready_only_after_a_passed_test_generation[dep_mc_a100_01]",
                              "test_status_matches_its_journal[dep_mc_a100_01]"]
    says(result, [f"*transitions.jsonl:{line}: deployment dep_mc_a100_01 entered ready from stopped, "
                  "not from health-checking*"])


def test_journal_that_skips_a_lifecycle_step_fails(pytester, reg):
    line = _journal_next(reg)
    append(reg / "transitions.jsonl", {"ts": "2026-11-30T18:01:00.000Z", "deployment": "dep_vast_5090_03",
                                       "provider": "vast", "target_id": None, "from": "running", "to": "destroyed"})
    edit_deployment(reg, "dep_vast_5090_03", status="destroyed", destroyed_at="2026-11-30T18:01:00.000Z")
    result = audit(pytester, reg)
    assert "test_status_matches_its_journal[dep_vast_5090_03]" in failed(result)
    says(result, [f"*transitions.jsonl:{line}: deployment dep_vast_5090_03: running → destroyed is not an allowed "
                  "transition*"])


