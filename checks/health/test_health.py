"""Post-provisioning health checks: one id per deployment (e.g. test_gpu_matches_order[dep_h3_01]).

Every remote fact comes from one batched probe per deployment per run; only when every check passes
(the test generation included) does the ready gate mark the deployment ready.
"""

from __future__ import annotations

from gpuharness.core.deployment import Deployment
from gpuharness.core.journal import JournalEntry
from gpuharness.core.lifecycle import journal, read_journal
from gpuharness.health import rules
from gpuharness.pytest_plugin.health import check_health_endpoint, run_generation


def test_host_reachable(health):
    if health.probe_entry.get("not_applicable"):
        health.judge(rules.skipped(health.probe_entry["not_applicable"]))
    error = health.probe_entry.get("error")
    if error:
        health.fail(rules.failed(error["kind"], f"host not reachable by {health.probe_entry.get('route')}: "
                                 f"{error['message']}"))
    probe = health.probe
    if not probe.complete:
        health.fail(rules.failed("probe_incomplete", "the probe was cut off before it finished (exit deadline); "
                                 "the host is overloaded or a command hangs: check it by hand"))
    assert probe.complete


def test_gpu_matches_order(health):
    health.judge(rules.gpu_matches_order(health.probe, health.deployment))


def test_driver_and_cuda_meet_minimum(health):
    min_driver, min_cuda = rules.minimums(health.model, health.workflow)
    health.judge(rules.driver_and_cuda(health.probe, min_driver, min_cuda))


def test_no_uncorrected_ecc(health):
    health.judge(rules.no_uncorrected_ecc(health.probe))


def test_no_harmful_throttling(health):
    health.judge(rules.no_harmful_throttling(health.probe))


def test_temperature_under_limit(health):
    health.judge(rules.temperature_under(health.probe, float(health.policy.get("temperature_max_c", 85))))


def test_no_foreign_compute_processes(health):
    health.judge(rules.no_foreign_compute(health.probe))


def test_disk_has_room_for_model(health):
    workspace = Deployment.from_json(health.deployment).workspace
    health.judge(rules.disk_has_room(health.probe, workspace, rules.model_bytes(health.model),
                                     float(health.policy.get("disk_margin_gb", 10))))


def test_service_process_and_port(health):
    pattern, port = rules.RUNTIME_DEFAULTS.get(str(health.deployment.get("runtime")), ("", None))
    health.judge(rules.service_up(health.probe, health.deployment.get("process") or pattern,
                                  health.deployment.get("service_port") or port))


def test_log_tail_has_no_classified_failure(health):
    health.judge(rules.log_tail_clean(health.probe, health.deployment.get("log_path")))


def test_service_health_endpoint(health):
    outcome = check_health_endpoint(health)
    if not outcome.ok:
        health.fail(rules.failed(outcome.cause or "unhealthy", outcome.message))


def test_test_generation_succeeds(health):
    outcome = run_generation(health)
    if not outcome.ok:
        remedy = f"; {outcome.remedy}" if outcome.remedy else ""
        health.fail(rules.failed(outcome.cause or "generation_failed", f"test generation failed: {outcome.message}"
                                 f"{remedy}"))


def test_cuda_smoke_test(health):
    health.judge(rules.cuda_smoke(health.probe))


def test_job_progress_advanced(health):
    if health.deployment.get("status") != "running":
        health.judge(rules.skipped(f"no job running (status {health.deployment.get('status')})"))
    previous = None
    previous_at = None
    for entry in read_journal(health.registry.journal_path):
        if entry.get("deployment") == health.id and entry.get("note") == "progress observation":
            previous, previous_at = entry.get("marker"), entry.get("observed_at")
    current = health.probe.progress
    journal(health.registry, JournalEntry.of(Deployment.from_json(health.deployment), marker=current,
                                             note="progress observation", route=health.probe_entry.get("route")))
    health.judge(rules.progress_advanced(current, previous if isinstance(previous, dict) else None, previous_at))
