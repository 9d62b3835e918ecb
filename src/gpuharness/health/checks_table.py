"""The health checks, declared once: each is a rule (id, title, the facts it reads) with how the ready gate counts
it. checks/health has one test per rule, named `test_<id>`; the plugin refuses a check that is not in the table."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final, final

from gpuharness.core.rules import Rule, RuleTable

TEST_PREFIX: Final = "test_"


@final
@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One health check. Every check must have run for `ready`; `may_skip` checks may skip (with their reason)
    without blocking it, and `serverless` checks are the ones a serverless endpoint (no host of ours) is judged on."""

    rule: Rule
    may_skip: bool = False
    serverless: bool = False

    @property
    def id(self) -> str:
        return self.rule.id

    @property
    def test_name(self) -> str:
        """The name of its test function in checks/health."""
        return TEST_PREFIX + self.rule.id


@final
class HealthChecks:
    """The health table: the checks in declaration order (the order the gate reports them in)."""

    __slots__ = ("_checks", "rules")

    def __init__(self, checks: Iterable[HealthCheck]) -> None:
        listed = tuple(checks)
        self.rules = RuleTable("health", (check.rule for check in listed))  # refuses an id declared twice
        self._checks = {check.id: check for check in listed}

    def __iter__(self) -> Iterator[HealthCheck]:
        return iter(self._checks.values())

    def __contains__(self, check_id: object) -> bool:
        return check_id in self._checks

    def __getitem__(self, check_id: str) -> HealthCheck:
        return self._checks[self.rules[check_id].id]  # an unknown id: the table's KeyError, naming those declared

    def ids(self) -> tuple[str, ...]:
        return self.rules.ids()

    def may_skip(self) -> frozenset[str]:
        return frozenset(check.id for check in self if check.may_skip)

    def serverless(self) -> frozenset[str]:
        return frozenset(check.id for check in self if check.serverless)

    def check_of(self, test_name: str) -> str | None:
        """The check id a test function name stands for, or None when the table has no such check."""
        check_id = test_name.removeprefix(TEST_PREFIX)
        return check_id if test_name.startswith(TEST_PREFIX) and check_id in self else None

    def unmatched(self, test_names: Iterable[str]) -> tuple[list[str], list[str]]:
        """(rules without a check, checks without a rule) for the test function names of a health suite."""
        names = list(test_names)
        without_check = [check.test_name for check in self if check.test_name not in names]
        without_rule = [name for name in names if self.check_of(name) is None]
        return without_check, without_rule


def _check(check_id: str, title: str, *reads: str, may_skip: bool = False, serverless: bool = False) -> HealthCheck:
    return HealthCheck(Rule(check_id, title, reads), may_skip=may_skip, serverless=serverless)


#: Every health check of a deployment, in the order the gate reports them.
HEALTH_CHECKS: Final = HealthChecks((
    _check("host_reachable", "the host answers by its recorded route with a known host key and the probe finishes",
           "connections.json route", "deployments.ssh", "probe.complete"),
    _check("gpu_matches_order", "GPU count, name and memory match the order",
           "probe.gpus", "deployments.gpu", "deployments.gpu_count"),
    _check("driver_and_cuda_meet_minimum", "the driver and CUDA meet the model's and the workflow's minimum",
           "probe.driver_version", "probe.cuda_version", "models.min_driver", "models.min_cuda",
           "workflows.min_driver", "workflows.min_cuda"),
    _check("no_uncorrected_ecc", "no uncorrected ECC errors", "probe.gpus.ecc_uncorrected"),
    _check("no_harmful_throttling", "no thermal, power-brake or HW-slowdown clock events",
           "probe.gpus.clock_event_names"),
    _check("temperature_under_limit", "every GPU is under the policy's temperature limit",
           "probe.gpus.temperature_c", "policy.temperature_max_c"),
    _check("no_foreign_compute_processes", "no compute process but the service's uses the GPU",
           "probe.compute_apps", "probe.processes"),
    _check("disk_has_room_for_model", "free disk on the workspace holds the model plus the policy's margin",
           "probe.disk_free_bytes", "deployments.ssh.workspace", "models.files.size", "policy.disk_margin_gb"),
    _check("service_process_and_port", "the service process runs and listens on its port",
           "probe.processes", "probe.listening_ports", "deployments.process", "deployments.service_port"),
    _check("log_tail_has_no_classified_failure", "the runtime log's tail has no classified failure that matters to "
           "the workflow (an optional module a working server could not import is a warning)",
           "probe.log_tail", "deployments.log_path", "probe.catalog (GET /object_info)", "workflows.test_generation"),
    _check("service_health_endpoint", "the runtime's health endpoint answers",
           "runtime health endpoint", "deployments.endpoint", serverless=True),
    _check("test_generation_succeeds", "the workflow's test generation succeeds within its timeout (a ComfyUI graph "
           "the server's catalog refuses is never submitted)",
           "runtime test generation", "workflows.test_generation", "deployments.endpoint",
           "probe.catalog (GET /object_info)", serverless=True),
    _check("cuda_smoke_test", "a matmul on the GPU matches the CPU, run by the service's own interpreter (skips only "
           "where the service does not import torch)", "probe.torch", "probe.smoke.interpreter",
           "probe.smoke.service_torch", "deployments.runtime", "deployments.runtime_python", may_skip=True),
    _check("gpu_performs_like_its_class", "the GPU performs like its class: the PCIe link it trained (under load where "
           "measured), its power limit, and where the policy asks for the measurement, pinned host<->device copies, "
           "device memory copies and dense matmul against the class's figures and performance_floor",
           "probe.gpus.pcie_gen_max", "probe.gpus.pcie_width_max", "probe.gpus.enforced_power_limit_w",
           "probe.gpus.power_default_limit_w", "probe.measurement", "gpu_classes", "policy.performance_floor",
           "workflows.precision", may_skip=True),
    _check("shutdown_guard_armed", "a billed deployment with a shutdown rule has its guard running on the host (rule "
           "loaded, pid alive, a recent heartbeat), so the rule stops it with no gpuharness process connected",
           "probe.guard", "deployments.shutdown_rule", "deployments.status", "deployments.cost_hr", may_skip=True),
    _check("job_progress_advanced", "a running job's progress marker advanced since the last observation",
           "probe.progress", "transitions.jsonl progress observation", may_skip=True),
))
