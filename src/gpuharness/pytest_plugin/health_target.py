"""What a health check reads about one deployment (HealthTarget), the runtime's answers included: its health
endpoint, its node catalog (taken with the probe) and the workflow's test generation, live, recorded or replayed per
mode. The runtime's client is built by runtimes.endpoint and its graph judged by runtimes.comfyui.workflow_fit."""

from __future__ import annotations

import contextlib
import functools
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

import pytest

from gpuharness import runtimes
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.core.terminal import shown
from gpuharness.gpu import performance
from gpuharness.health import rules
from gpuharness.probe import server_catalog, targets
from gpuharness.probe.facts import ProbeResult, ProbeTargets
from gpuharness.probe.probing import ProbeRecord, ProgressObservation
from gpuharness.probe.transcripts import known_secrets
from gpuharness.providers import cassette
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes.comfyui import workflow_fit
from gpuharness.runtimes.comfyui.workflow_fit import WorkflowFit
from gpuharness.runtimes.endpoint import runtime_client

PROPERTY: Final = "gpuharness_health"


class HealthWarning(UserWarning):
    """A health finding that does not fail its check (a harmless log line, a workflow not validated): shown in the
    warnings summary, the test's captured output (-rA, the HTML report) and its report properties (JUnit)."""


@dataclass
class HealthTarget:
    """What a check reads about one deployment: its record, manifests and policy, the run's probe of it, and the
    runtime's answers. Checks read these and assert; they write nothing."""

    deployment: Deployment
    registry: Registry
    policy: Policy
    mode: cassette.Mode
    cassettes: Path
    record: ProbeRecord
    node: pytest.Item
    model: dict[str, Any] | None = None
    workflow: dict[str, Any] | None = None
    _probe: ProbeResult | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return self.deployment.id

    @property
    def probe_targets(self) -> ProbeTargets:
        """What the probe looked at: workspace, service process and port, log."""
        return targets.probe_targets(self.deployment, self.policy)

    @property
    def probe(self) -> ProbeResult:
        """The parsed probe; skips dependent checks (with the reason) when the host could not be probed, and fails
        each of them (probe_corrupt) when the probe's output cannot be believed."""
        if self._probe is None:
            if self.record.not_applicable:
                pytest.skip(shown(f"{self.id}: {self.record.not_applicable}"))
            if self.record.failure or self.record.transcript is None:
                kind = self.record.failure.kind if self.record.failure else "no transcript"
                pytest.skip(shown(f"no probe of {self.id}: {kind} (see test_host_reachable[{self.id}])"))
            parsed = self.record.transcript.parse()
            corrupt = rules.probe_corrupt(parsed)
            if corrupt is not None:
                self.fail(corrupt)
            self._probe = parsed
        return self._probe

    @property
    def progress(self) -> ProgressObservation:
        """A running job's progress marker now and at its previous observation (taken with the probe)."""
        _ = self.probe  # skips, with the reason, when the host could not be probed
        observation = self.record.progress
        if observation is None:
            pytest.fail(f"{self.id}: the probe observed no progress: the deployment was not running when it was "
                        "taken", pytrace=False)
        if observation.problem:
            pytest.fail(shown(f"{self.id}: cannot observe progress: {observation.problem}"), pytrace=False)
        return observation

    @functools.cached_property
    def workflow_fit(self) -> WorkflowFit | None:
        """The workflow's test graph judged against the server's node catalog taken with the probe, as the server
        would judge it on POST /prompt (None: not a ComfyUI deployment)."""
        return judge_workflow(self)

    def warn(self, text: str) -> None:
        """Report a finding that does not fail the check (escaped: its text may quote a host's log)."""
        text = shown(text)
        self.node.user_properties.append((PROPERTY + "_warning", text))
        print(f"gpuharness warning: {self.id}: {text}")  # the captured output: -rA, the HTML report
        with warnings.catch_warnings():
            warnings.simplefilter("always", HealthWarning)
            self.node.warn(HealthWarning(f"{self.id}: {text}"))

    def performance(self) -> rules.Verdict:
        """The GPU against its class (the probe's link and power facts, the measurement where the policy asked for
        one); every figure is recorded as the deployment's health evidence and in the report (JUnit properties)."""
        floor = self.policy.performance_floor
        verdict, report = rules.gpu_performs_like_its_class(self.probe, self.record.measurement, floor)
        measurement = self.record.measurement.parse() if self.record.measurement is not None else None
        evidence = performance.evidence(report, measurement, self.record.probed_at)
        self.node.user_properties.append((PROPERTY + "_performance", evidence))
        print(shown(f"gpuharness performance: {self.id}: {evidence['message']}"))  # the captured output: -rA, HTML
        return verdict

    def service_health(self) -> runtimes.Outcome:
        """The runtime's answer on its health endpoint (live, recorded or replayed per mode)."""
        return health_endpoint(self)

    def test_generation(self) -> runtimes.Outcome:
        """The workflow's test generation against the runtime (live, recorded or replayed per mode)."""
        return generation(self)

    def fail(self, verdict: rules.Verdict) -> NoReturn:
        """Fail the check with the verdict's message; its cause goes to the gate with the report."""
        self.node.user_properties.append((PROPERTY + "_cause", verdict.cause))
        pytest.fail(shown(f"{self.id}: {verdict.message}"), pytrace=False)

    def judge(self, verdict: rules.Verdict) -> str:
        """Pass, skip (only optional checks return skips) or fail with the verdict's actionable message; a passing
        verdict's warnings are reported."""
        for text in verdict.warnings:
            self.warn(text)
        if verdict.skip:
            pytest.skip(shown(verdict.message))
        if not verdict.ok:
            self.fail(verdict)
        return verdict.message


def judge_workflow(target: HealthTarget) -> WorkflowFit | None:
    """The workflow's test graph against the catalog of this run (None: a server without a node catalog)."""
    if not server_catalog.applies(target.deployment):
        return None
    return workflow_fit.judge_test_graph(target.workflow, target.record.catalog)


def _client(target: HealthTarget) -> PhaseHttp:
    client = runtime_client(target.deployment, target.registry)
    if client is None:
        target.fail(rules.failed("no_endpoint", "no endpoint recorded for the service; set `endpoint` in "
                                 "deployments.json (e.g. http://HOST:8188)"))
    return client


def _recording(target: HealthTarget, name: str) -> contextlib.AbstractContextManager[Any]:
    """Replay (offline) or record the runtime's HTTP; live talks to it directly."""
    if target.mode is cassette.Mode.LIVE:
        return contextlib.nullcontext()
    path = target.cassettes / "runtime" / f"{target.id}-{name}.yaml"
    return cassette.use(path, target.mode, secrets=known_secrets(target.registry),
                        recorded_against=target.record.source or "the deployment's runtime")


def health_endpoint(target: HealthTarget) -> runtimes.Outcome:
    """The runtime's answer on its health endpoint."""
    try:
        with _recording(target, "health"), _client(target) as client:
            return runtimes.health(str(target.deployment.runtime), client)
    except UserError as exc:  # offline: no recorded interaction
        return runtimes.failed("no_recording", exc.line())


def generation(target: HealthTarget) -> runtimes.Outcome:
    """The workflow's test generation against the deployment's runtime."""
    workflow = target.workflow
    if workflow is None:
        target.fail(rules.failed(
            "no_workflow", f"deployment has no workflow manifest (workflow={target.deployment.workflow!r}); "
            "add it to workflows.json with a test_generation, so readiness is proven by a real generation"))
    runtime = str(target.deployment.runtime or workflow.get("runtime"))
    fit = target.workflow_fit
    refusal = workflow_fit.refusal(fit) if fit is not None else None
    if refusal is not None:
        return refusal
    if fit is not None and not fit.judged:
        target.warn(f"the test graph was not validated against the server's node catalog: {fit.note}")
    sleep: runtimes.Sleep = (lambda _s: None) if target.mode is cassette.Mode.OFFLINE else time.sleep
    try:
        with _recording(target, "generation"), _client(target) as client:
            return runtimes.run_test_generation(runtime, client, workflow, model=target.deployment.model,
                                                sleep=sleep, client_id=f"gpuharness-{target.id}")
    except UserError as exc:  # offline: no recorded interaction
        return runtimes.failed("no_recording", exc.line())
