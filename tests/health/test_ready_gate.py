"""The ready gate: once, on the xdist controller, only after every check passed; failures are recorded and a
second failure is `error`; offline replay and -n 2 give the same verdicts."""

from __future__ import annotations

import json

import pytest
from health_world import HealthWorld, run_checks

from gpuharness.core.lifecycle import read_journal
from gpuharness.sim.host import HostSpec, with_fault


def verdicts(world):
    out = {}
    for dep in world.registry.deployments():
        health = dep.health or {}
        out[dep.id] = (dep.status, health.get("cause"), health.get("checks"), health.get("failed_checks"))
    return out


def test_ready_records_evidence_and_journals_the_transition(pytester, world):
    world.add("dep_ok")
    report = pytester.path / "report.xml"
    run_checks(pytester, world, f"--junitxml={report}").assert_outcomes(passed=15, skipped=1)
    deployment = world.deployment("dep_ok")
    assert deployment["status"] == "ready"
    assert deployment["health"]["report"] == str(report)
    assert deployment["health"]["passed_at"] == deployment["ready_at"]
    assert deployment["health"]["checks"]["test_generation_succeeds"] == "passed"
    moves = [e for e in read_journal(world.registry.journal_path) if e["deployment"] == "dep_ok"]
    assert [(e["from"], e["to"]) for e in moves] == [("health-checking", "ready")]
    assert moves[0]["marker"] == deployment["health"]["probe_digest"]


def test_second_failure_marks_the_deployment_error(pytester, world):
    world.add("dep_bad", HostSpec(temperature_c=95))
    run_checks(pytester, world)
    first = world.deployment("dep_bad")
    assert (first["status"], first["health"]["failures"], first["health"]["cause"]) == (
        "health-checking", 1, "overheating")
    run_checks(pytester, world)
    second = world.deployment("dep_bad")
    assert (second["status"], second["health"]["failures"]) == ("error", 2)
    assert "overheating" in second["error"]


def test_a_partial_run_never_marks_ready(pytester, world):
    world.add("dep_ok")
    result = run_checks(pytester, world, "-k", "gpu_matches_order")
    result.assert_outcomes(passed=1)
    assert world.deployment("dep_ok")["status"] == "health-checking"
    result.stdout.fnmatch_lines(["*dep_ok: NOT ready (checks not run: host_reachable*"])


def test_only_health_checking_deployments_are_gated(pytester, world):
    world.add("dep_cfg", status="configuring")
    run_checks(pytester, world, "--deployment", "dep_cfg").assert_outcomes(passed=15, skipped=1)
    assert world.deployment("dep_cfg")["status"] == "configuring"


def test_no_deployment_awaiting_health_collects_nothing_to_gate(pytester, world):
    world.add("dep_done", status="ready")
    result = run_checks(pytester, world)
    assert "READY" not in result.stdout.str()
    assert world.deployment("dep_done")["status"] == "ready"


def test_xdist_gives_the_same_verdicts_and_probes_each_host_once(pytester, tmp_path):
    results = []
    for label, extra in (("serial", ()), ("xdist", ("-n", "2"))):
        world = HealthWorld(tmp_path / label)
        try:
            world.add("dep_ok")
            world.add("dep_hot", HostSpec(temperature_c=95))
            world.add("dep_oom", with_fault(HostSpec(), "oom"))
            run_checks(pytester, world, *extra)
            results.append(verdicts(world))
            assert {name: host.stats["ssh_execs"] for name, host in world.hosts.items()} == \
                {"dep_ok": 1, "dep_hot": 1, "dep_oom": 1}
            assert all(host.stats["ssh_connections"] == 1 for host in world.hosts.values())
        finally:
            world.close()
    assert results[0] == results[1]
    assert results[0]["dep_ok"][0] == "ready" and results[0]["dep_hot"][1] == "overheating"


def test_offline_replays_the_recorded_probe_and_runtime_http(pytester, world):
    world.add("dep_rec")
    cassettes = pytester.path / "cassettes"
    run_checks(pytester, world, "--cassettes", str(cassettes), mode="record").assert_outcomes(passed=15, skipped=1)
    transcript = json.loads((cassettes / "ssh" / "dep_rec.json").read_text())
    assert transcript["source"] == "simulator" and transcript["exit_status"] == 0 and transcript["recorded_at"]
    assert (cassettes / "runtime" / "dep_rec-generation.yaml").is_file()
    digest = world.deployment("dep_rec")["health"]["probe_digest"]
    world.hosts["dep_rec"].stop()  # offline never touches the host
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["status"] = "health-checking"
    replay = run_checks(pytester, world, "--cassettes", str(cassettes), mode="offline")
    replay.assert_outcomes(passed=15, skipped=1)
    replay.stdout.fnmatch_lines(["*dep_rec: offline replay: checks pass on the recording; status unchanged*"])
    deployment = world.deployment("dep_rec")
    assert deployment["status"] == "health-checking", "a replay never marks a deployment ready"
    assert deployment["health"]["probe_digest"] == digest


def test_offline_without_a_transcript_says_how_to_record_one(pytester, world):
    world.add("dep_new")
    result = run_checks(pytester, world, "--cassettes", str(pytester.path / "empty"), mode="offline")
    result.stdout.fnmatch_lines(["FAILED*test_host_reachable[[]dep_new[]]*no probe transcript*--gpu-mode record*"])
    assert world.hosts["dep_new"].stats["ssh_connections"] == 0


def test_a_missing_route_is_not_counted_as_a_deployment_failure(pytester, world):
    world.add("dep_new")
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["ssh"] = {"user": "root"}
    for _ in range(2):
        result = run_checks(pytester, world)
        result.stdout.fnmatch_lines(["*dep_new: NOT judged: host_reachable: no_route*"])
    deployment = world.deployment("dep_new")
    assert deployment["status"] == "health-checking" and deployment.get("health") is None


def test_an_unknown_deployment_id_is_a_usage_error_with_the_known_ids(pytester, world):
    world.add("dep_ok")
    result = run_checks(pytester, world, "--deployment", "dep_typo")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "no deployment 'dep_typo' (known: dep_ok)" in result.stdout.str() + result.stderr.str()
    assert world.deployment("dep_ok")["status"] == "health-checking"


def test_a_destroyed_deployment_is_refused_before_any_probe(pytester, world):
    world.add("dep_gone", status="destroyed")
    result = run_checks(pytester, world, "--deployment", "dep_gone")
    out = result.stdout.str() + result.stderr.str()
    assert result.ret != pytest.ExitCode.OK
    assert "dep_gone is destroyed: its instance is gone, so there is no host to check" in out
    assert "gpuharness provision" in out and "passed" not in result.parseoutcomes()
    assert world.deployment("dep_gone")["status"] == "destroyed"
    assert not [e for e in read_journal(world.registry.journal_path) if e["deployment"] == "dep_gone"]


def test_trust_on_first_use_is_an_opt_in_recorded_in_connections(pytester, world):
    host = world.add("dep_tofu")
    host.known_hosts_path.write_text("")
    refused = run_checks(pytester, world, "-k", "host_reachable")
    refused.stdout.fnmatch_lines(["*dep_tofu: NOT judged*",
                                  "FAILED*test_host_reachable[[]dep_tofu[]]*host_key_unknown*"])
    with world.registry.update("connections.json") as doc:
        doc["connections"] = [{"target": "dep_tofu", "kind": "ssh", "trust_on_first_use": True}]
    run_checks(pytester, world).assert_outcomes(passed=15, skipped=1)
    entry = world.registry.items("connections.json")[0]
    assert entry["host_key"].startswith("ecdsa-sha2-nistp256 SHA256:")
    assert entry["last_probe"]["result"] == "exit 0"
    assert f"[127.0.0.1]:{host.ssh_port}" in host.known_hosts_path.read_text()
    assert world.deployment("dep_tofu")["status"] == "ready"


def test_a_serverless_endpoint_is_gated_on_its_health_and_test_job(pytester, world, monkeypatch):
    monkeypatch.setenv("RUNPOD_API_KEY", "rp-secret-key-for-test-1234")
    server = world.add_serverless("dep_sls")
    result = run_checks(pytester, world)
    result.assert_outcomes(passed=2, skipped=14)
    assert world.deployment("dep_sls")["status"] == "ready"
    assert any("runsync" in request for request in server.requests)


def test_a_serverless_job_that_fails_is_classified(pytester, world):
    from gpuharness.sim.runtimes import RuntimeFaults

    world.add_serverless("dep_sls", RuntimeFaults(oom=True, polls_before_done=0))
    result = run_checks(pytester, world)
    result.stdout.fnmatch_lines(["FAILED*test_test_generation_succeeds[[]dep_sls[]]*FAILED*out of memory*"])
    assert world.deployment("dep_sls")["health"]["cause"] == "cuda_oom"


def test_an_invalid_workflow_manifest_is_an_error_naming_the_file_and_field_never_a_missing_manifest(
        pytester, world):
    world.add("dep_ok")
    path = world.registry.path("workflows.json")
    document = json.loads(path.read_text())
    document["workflows"][0]["test_generation"]["timeout_s"] = "soon"
    path.write_text(json.dumps(document))
    result = run_checks(pytester, world)
    assert result.ret == pytest.ExitCode.INTERRUPTED  # exit 2: bad input
    text = result.stdout.str() + result.stderr.str()
    errors = [line for line in text.splitlines() if "workflows.json" in line and "ERROR" not in line]
    assert len(errors) == 1, errors
    assert "workflows.json:$.workflows[0].test_generation.timeout_s: 'soon' is not of type 'number'" in errors[0]
    assert "has no workflow manifest" not in text
    assert world.deployment("dep_ok")["status"] == "health-checking"
    assert world.hosts["dep_ok"].stats["ssh_connections"] == 0, "nothing is probed on a broken registry"


def test_a_manifest_broken_after_collection_is_not_counted_against_the_deployment(pytester, world):
    world.add("dep_ok")
    pytester.makeconftest(f"""
def pytest_collection_finish(session):
    path = {str(world.registry.path("workflows.json"))!r}
    open(path, "w").write("{{not json")
""")
    result = run_checks(pytester, world)
    result.stdout.fnmatch_lines(["*ERROR at setup of test_host_reachable[[]dep_ok[]]*",
                                 "*workflows.json:1:2: invalid JSON:*"])
    result.stdout.fnmatch_lines(["*dep_ok: NOT judged: host_reachable: bad_manifest*"])
    deployment = world.deployment("dep_ok")
    assert deployment["status"] == "health-checking" and deployment.get("health") is None
