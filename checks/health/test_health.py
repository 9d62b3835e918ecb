"""Post-provisioning health checks: one id per deployment (e.g. test_gpu_matches_order[dep_h3_01]).

Each test is a check of the health table (gpuharness.health.checks_table), named test_<id>. Every remote fact comes
from one batched probe per deployment per run, handed over by the `health` fixture; a check reads facts and
asserts, and writes nothing. Only when every check passes (the test generation included) does the ready gate mark
the deployment ready.
"""

from __future__ import annotations

from gpuharness.health import rules


def test_host_reachable(health):
    if health.record.not_applicable:
        health.judge(rules.skipped(health.record.not_applicable))
    if health.deployment.never_came_up:
        health.fail(rules.failed("not_up", f"its instance never came up (no route recorded); {health.next_step}"))
    failure = health.record.failure
    if failure:
        health.fail(rules.failed(failure.kind, f"host not reachable by {health.record.route}: {failure.message}"))
    probe = health.probe
    if not probe.complete:
        health.fail(rules.failed("probe_incomplete", "the probe was cut off before it finished (exit deadline); "
                                 "the host is overloaded or a command hangs: check it by hand"))
    health.judge(rules.passed(f"reached by {health.record.route}; the probe ran to its end"))


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
    health.judge(rules.temperature_under(health.probe, health.policy.temperature_max_c))


def test_no_foreign_compute_processes(health):
    health.judge(rules.no_foreign_compute(health.probe))


def test_disk_has_room_for_model(health):
    health.judge(rules.disk_has_room(health.probe, health.probe_targets.workspace, rules.model_bytes(health.model),
                                     health.policy.disk_margin_gb))


def test_service_process_and_port(health):
    looks_at = health.probe_targets
    health.judge(rules.service_up(health.probe, looks_at.process_pattern or "", looks_at.service_port))


def test_log_tail_has_no_classified_failure(health):
    health.judge(rules.log_tail_clean(health.probe, health.probe_targets.log_path, health.workflow_fit))


def test_service_health_endpoint(health):
    outcome = health.service_health()
    if not outcome.ok:
        health.fail(rules.failed(outcome.cause or "unhealthy", outcome.message))
    health.judge(rules.passed(outcome.message))


def test_test_generation_succeeds(health):
    outcome = health.test_generation()
    if not outcome.ok:
        remedy = f"; {outcome.remedy}" if outcome.remedy else ""
        health.fail(rules.failed(outcome.cause or "generation_failed", f"test generation failed: {outcome.message}"
                                 f"{remedy}"))
    health.judge(rules.passed(outcome.message))


def test_cuda_smoke_test(health):
    deployment = health.deployment
    health.judge(rules.cuda_smoke(health.probe, deployment.runtime, deployment.runtime_python))


def test_gpu_performs_like_its_class(health):
    health.judge(health.performance())


def test_shutdown_guard_armed(health):
    health.judge(rules.shutdown_guard_armed(health.probe, health.deployment))


def test_job_progress_advanced(health):
    if health.deployment.status != "running":
        health.judge(rules.skipped(f"no job running (status {health.deployment.status})"))
    observed = health.progress
    health.judge(rules.progress_advanced(observed.current, observed.previous, observed.previous_at))
