"""checks/health support: deployment parametrization, the probe cache (once per deployment per run, across
xdist workers), runtime HTTP with cassettes, and the ready gate (the only path to `ready`)."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, NoReturn

import httpx
import pytest
from filelock import FileLock

from gpuharness import runtimes
from gpuharness.core import lifecycle
from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.core.secrets import scrub_text
from gpuharness.health import probe
from gpuharness.health import rules as health_rules
from gpuharness.health.probe import ProbeResult, ProbeTargets
from gpuharness.providers import cassette
from gpuharness.pytest_plugin import cassette_dir, registry_root
from gpuharness.remote import RemoteError

#: Every health check, by test name without `test_`. All must pass for `ready`.
REQUIRED_CHECKS: Final = (
    "host_reachable", "gpu_matches_order", "driver_and_cuda_meet_minimum", "no_uncorrected_ecc",
    "no_harmful_throttling", "temperature_under_limit", "no_foreign_compute_processes", "disk_has_room_for_model",
    "service_process_and_port", "log_tail_has_no_classified_failure", "service_health_endpoint",
    "test_generation_succeeds", "cuda_smoke_test", "job_progress_advanced",
)
#: Checks that may be skipped (with a reason) without blocking `ready`: no torch, no running job.
OPTIONAL_CHECKS: Final = frozenset({"cuda_smoke_test", "job_progress_advanced"})
#: What a serverless endpoint (no host of ours to probe) is judged on.
SERVERLESS_CHECKS: Final = frozenset({"service_health_endpoint", "test_generation_succeeds"})
AWAITING: Final = frozenset({"health-checking"})
#: Failures of the harness's inputs (no recording, no route, a key never verified), not of the deployment:
#: reported, never counted.
NOT_JUDGED: Final = frozenset({"no_transcript", "bad_transcript", "no_recording", "no_route", "host_key_unknown"})
PROPERTY: Final = "gpuharness_health"


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Remove secrets from a transcript: known values, private key blocks, bearer tokens, key=value secrets."""
    return scrub_text(text, secrets)


def selected_deployments(config: pytest.Config) -> list[str]:
    """--deployment IDs, else every deployment awaiting health."""
    chosen: list[str] = config.getoption("--deployment") or []
    if chosen:
        return list(dict.fromkeys(chosen))
    registry = Registry(registry_root(config))
    if not registry.path("deployments.json").exists():
        return []
    return [d["id"] for d in registry.deployments() if d.get("status") in AWAITING]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "health_deployment_id" in metafunc.fixturenames:
        try:
            ids = selected_deployments(metafunc.config)
        except UserError as exc:
            raise pytest.UsageError(exc.line()) from None
        registry = Registry(registry_root(metafunc.config))  # unknown --deployment ids: see pytest_configure
        if not ids:
            reason = (f"no deployment awaiting health in {registry.path('deployments.json')} (statuses "
                      f"{', '.join(sorted(AWAITING))}); pass --deployment ID to check one")
            metafunc.parametrize("health_deployment_id",
                                 [pytest.param("", marks=pytest.mark.skip(reason=reason))], ids=["none"])
            return
        metafunc.parametrize("health_deployment_id", ids, ids=ids)


def cache_dir(config: pytest.Config) -> Path:
    """A directory shared by the controller and every xdist worker of this run (not across runs)."""
    factory = config._tmp_path_factory  # type: ignore[attr-defined]
    base: Path = factory.getbasetemp()
    root = base.parent if hasattr(config, "workerinput") else base
    path = root / "gpuharness-health"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _mode(config: pytest.Config) -> cassette.Mode:
    return cassette.Mode.parse(config.getoption("--gpu-mode"))


def probe_targets(deployment: dict[str, Any], policy: Policy) -> ProbeTargets:
    ssh = deployment.get("ssh") or {}
    pattern, port = health_rules.RUNTIME_DEFAULTS.get(str(deployment.get("runtime")), (None, None))
    timeouts = policy.get("health_timeouts") or {}
    workspace = ssh.get("workspace") or "/workspace"
    return ProbeTargets(workspace=workspace, process_pattern=deployment.get("process") or pattern,
                        service_port=deployment.get("service_port") or port, log_path=deployment.get("log_path"),
                        checkpoint_path=deployment.get("checkpoint_path"),
                        nvidia_smi_timeout_s=int(timeouts.get("nvidia_smi_s", 10)))


def transcript_path(cassettes: Path, deployment_id: str) -> Path:
    return cassettes / "ssh" / f"{deployment_id}.json"


def _credential_envs(registry: Registry) -> list[str | None]:
    try:
        return [p.get("credential_env") for p in registry.providers()]
    except UserError:
        return []


def live_probe(config: pytest.Config, registry: Registry, deployment: dict[str, Any]) -> dict[str, Any]:
    """Connect once by the recorded route, run the probe in one exec, record the route's last probe."""
    from gpuharness.remote.connect import open_remote, resolve  # paramiko (~0.2 s): only a live probe needs it

    policy = Policy(registry.policy_document())
    timeouts = policy.get("health_timeouts") or {}
    connections = registry.items("connections.json")
    route = resolve(deployment, connections)
    entry: dict[str, Any] = {"route": route.label, "transport": route.transport}
    started = time.monotonic()
    try:
        remote = open_remote(route, connect_timeout_s=float(timeouts.get("connect_s", 15)))
    except RemoteError as exc:  # one attempt: never retried
        entry["error"] = {"kind": exc.kind, "message": str(exc)}
        _record_connection(registry, deployment["id"], route.label, route.transport, f"failed: {exc.kind}", None)
        return entry
    try:
        result = remote.exec(probe.build_script(probe_targets(deployment, policy)),
                             deadline_s=float(timeouts.get("probe_s", 120)))
    except RemoteError as exc:
        entry["error"] = {"kind": exc.kind, "message": str(exc)}
        return entry
    finally:
        remote.close()
    accepted = getattr(remote, "accepted_host_key", None)
    entry["connections"] = getattr(remote, "connections", 0)
    entry["execs"] = getattr(remote, "execs", 1)
    entry["transcript"] = {"stdout": result.stdout, "stderr": result.stderr, "exit_status": result.exit_status,
                           "timed_out": result.timed_out, "duration_s": round(time.monotonic() - started, 3)}
    outcome = "timed out" if result.timed_out else f"exit {result.exit_status}"
    _record_connection(registry, deployment["id"], route.label, route.transport, outcome, accepted)
    if _mode(config) is cassette.Mode.RECORD:
        secrets = cassette.secret_values(_credential_envs(registry))
        loopback = route.transport == "ssh" and route.host in {"127.0.0.1", "localhost"}
        source = (deployment.get("labels") or {}).get("source") or ("simulator" if loopback else "real hardware")
        document = {"deployment": deployment["id"], "recorded_at": now_ts(), "source": source,
                    "probe_version": probe.PROBE_VERSION, "stdout": scrub(result.stdout, secrets),
                    "stderr": scrub(result.stderr, secrets), "exit_status": result.exit_status}
        path = transcript_path(cassette_dir(config), deployment["id"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(document, indent=2) + "\n")
    return entry


def _record_connection(registry: Registry, target: str, route: str, transport: str, result: str,
                       accepted_key: str | None) -> None:
    """connections.json: the route used and its last probe; a trust-on-first-use acceptance is recorded."""
    with registry.update("connections.json") as document:
        items = document["connections"]
        entry = next((c for c in items if c.get("target") == target), None)
        if entry is None:
            entry = {"target": target, "kind": "local" if transport == "local" else "ssh", "route": route,
                     "created_at": now_ts()}
            items.append(entry)
        entry["last_probe"] = {"phase": "health", "at": now_ts(), "result": result}
        entry["owner"] = entry.get("owner") or "gpuharness health"
        entry["pid"] = os.getpid()
        if accepted_key:
            entry["host_key"] = accepted_key
            entry["trust_on_first_use"] = True


def offline_probe(config: pytest.Config, deployment_id: str) -> dict[str, Any]:
    path = transcript_path(cassette_dir(config), deployment_id)
    if not path.is_file():
        return {"route": "offline", "error": {
            "kind": "no_transcript",
            "message": f"no probe transcript {path}; record one with `pytest checks/health --gpu-mode record "
                       f"--deployment {deployment_id}` or run live with --gpu-mode live"}}
    try:
        document = json.loads(path.read_text())
    except ValueError as exc:
        return {"route": "offline", "error": {"kind": "bad_transcript", "message": f"{path}: not JSON: {exc}"}}
    return {"route": f"offline replay of {path.name} ({document.get('source', 'unknown source')})",
            "source": document.get("source"), "connections": 0, "execs": 0,
            "transcript": {"stdout": document.get("stdout", ""), "stderr": document.get("stderr", ""),
                           "exit_status": document.get("exit_status")}}


def cached_probe(config: pytest.Config, registry: Registry, deployment: dict[str, Any]) -> dict[str, Any]:
    """The probe of a deployment for this run: run once under a file lock, shared with every worker."""
    directory = cache_dir(config)
    target = directory / f"probe-{deployment['id']}.json"
    if deployment.get("runtime") == "serverless" and not deployment.get("ssh"):
        return {"route": None, "not_applicable": "a serverless endpoint has no host to probe"}
    with FileLock(str(target) + ".lock", timeout=600):
        if target.exists():
            cached: dict[str, Any] = json.loads(target.read_text())
            return cached
        if _mode(config) is cassette.Mode.OFFLINE:
            entry = offline_probe(config, deployment["id"])
        else:
            try:
                entry = live_probe(config, registry, deployment)
            except UserError as exc:  # no usable route recorded: the registry needs fixing, not the host
                entry = {"route": None, "error": {"kind": "no_route", "message": exc.line()}}
        entry["probed_at"] = now_ts()
        target.write_text(json.dumps(entry))
        return entry


@dataclass
class HealthTarget:
    """Everything a health check needs about one deployment (the probe is loaded once per run)."""

    deployment: dict[str, Any]
    registry: Registry
    policy: Policy
    mode: cassette.Mode
    cassettes: Path
    probe_entry: dict[str, Any]
    node: pytest.Item
    model: dict[str, Any] | None = None
    workflow: dict[str, Any] | None = None
    _probe: ProbeResult | None = field(default=None, repr=False)

    @property
    def id(self) -> str:
        return str(self.deployment["id"])

    @property
    def probe(self) -> ProbeResult:
        """The parsed probe; skips dependent checks (with the reason) when the host could not be probed."""
        if self._probe is None:
            if self.probe_entry.get("not_applicable"):
                pytest.skip(f"{self.id}: {self.probe_entry['not_applicable']}")
            error = self.probe_entry.get("error")
            if error:
                pytest.skip(f"no probe of {self.id}: {error['kind']} (see test_host_reachable[{self.id}])")
            transcript = self.probe_entry["transcript"]
            self._probe = probe.parse(transcript["stdout"], transcript.get("stderr", ""),
                                      transcript.get("exit_status"))
        return self._probe

    def fail(self, verdict: health_rules.Verdict) -> NoReturn:
        self.node.user_properties.append((PROPERTY + "_cause", verdict.cause))
        pytest.fail(f"{self.id}: {verdict.message}", pytrace=False)

    def judge(self, verdict: health_rules.Verdict) -> str:
        """Pass, skip (only optional checks return skips) or fail with the verdict's actionable message."""
        if verdict.skip:
            pytest.skip(verdict.message)
        if not verdict.ok:
            self.fail(verdict)
        return verdict.message

    def http_client(self) -> httpx.Client:
        endpoint = self.deployment.get("endpoint")
        if not endpoint:
            self.fail(health_rules.failed("no_endpoint", "no endpoint recorded for the service; set `endpoint` in "
                                          "deployments.json (e.g. http://HOST:8188)"))
        headers = {}
        if self.deployment.get("runtime") == "serverless":
            try:
                env = self.registry.provider(str(self.deployment["provider"])).get("credential_env")
            except UserError:
                env = None
            if env and os.environ.get(env):
                headers["Authorization"] = f"Bearer {os.environ[env]}"
            endpoint = endpoint.rstrip("/") + "/"
        return httpx.Client(base_url=endpoint, headers=headers, timeout=httpx.Timeout(30.0))

    def runtime_cassette(self, name: str) -> Any:
        """Replay (offline) or record runtime HTTP; live uses the network directly."""
        import contextlib

        if self.mode is cassette.Mode.LIVE:
            return contextlib.nullcontext()
        secrets = cassette.secret_values(_credential_envs(self.registry))
        path = self.cassettes / "runtime" / f"{self.id}-{name}.yaml"
        return cassette.use(path, self.mode, secrets=secrets,
                            recorded_against=str(self.probe_entry.get("source") or "the deployment's runtime"))


def _manifest(registry: Registry, file_name: str, key: str, value: Any) -> dict[str, Any] | None:
    if not value:
        return None
    try:
        items = registry.items(file_name)
    except UserError:
        return None
    matches = [item for item in items if item.get(key) == value]
    return max(matches, key=lambda item: int(item.get("version", 0))) if matches else None


@pytest.fixture
def health(request: pytest.FixtureRequest, health_deployment_id: str) -> Iterator[HealthTarget]:
    """The deployment under check, with its probe (run once per deployment per run, across workers)."""
    config = request.config
    check = request.node.originalname.removeprefix("test_")  # type: ignore[attr-defined]
    request.node.user_properties.append((PROPERTY, {"deployment": health_deployment_id, "check": check}))
    registry = Registry(registry_root(config))
    deployment = registry.deployment(health_deployment_id)
    entry = cached_probe(config, registry, deployment)
    transcript = entry.get("transcript")
    if transcript:
        digest = probe.digest_of(transcript["stdout"], transcript.get("stderr", ""), transcript.get("exit_status"))
        request.node.user_properties.append((PROPERTY + "_probe", {"digest": digest, "route": entry.get("route")}))
    yield HealthTarget(deployment=deployment, registry=registry, policy=Policy(registry.policy_document()),
                       mode=_mode(config), cassettes=cassette_dir(config), probe_entry=entry, node=request.node,
                       model=_manifest(registry, "models.json", "name", deployment.get("model")),
                       workflow=_manifest(registry, "workflows.json", "id", deployment.get("workflow")))


def _runtime_sleep(target: HealthTarget) -> runtimes.Sleep:
    return (lambda _s: None) if target.mode is cassette.Mode.OFFLINE else time.sleep


def run_generation(target: HealthTarget) -> runtimes.Outcome:
    """The workflow's test generation against the deployment's runtime (recorded or replayed per mode)."""
    workflow = target.workflow
    if workflow is None:
        target.fail(health_rules.failed(
            "no_workflow", f"deployment has no workflow manifest (workflow={target.deployment.get('workflow')!r}); "
            "add it to workflows.json with a test_generation, so readiness is proven by a real generation"))
    runtime = str(target.deployment.get("runtime") or workflow.get("runtime"))
    try:
        with target.runtime_cassette("generation"), target.http_client() as client:
            return runtimes.run_test_generation(runtime, client, workflow, model=target.deployment.get("model"),
                                                sleep=_runtime_sleep(target), client_id=f"gpuharness-{target.id}")
    except UserError as exc:  # offline: no recorded interaction
        return runtimes.failed("no_recording", exc.line())


def check_health_endpoint(target: HealthTarget) -> runtimes.Outcome:
    runtime = str(target.deployment.get("runtime"))
    try:
        with target.runtime_cassette("health"), target.http_client() as client:
            return runtimes.health(runtime, client)
    except UserError as exc:
        return runtimes.failed("no_recording", exc.line())


# --- the ready gate ------------------------------------------------------------------------------------------

@dataclass
class CheckResult:
    outcome: str
    message: str = ""
    cause: str | None = None


class ReadyGate:
    """Collects per-check outcomes on the controller; at session end moves deployments to ready or records
    the classified failure (a second failure: error)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, dict[str, CheckResult]] = {}
        self.probes: dict[str, dict[str, Any]] = {}
        self.decisions: list[str] = []

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        props: dict[str, Any] = dict(report.user_properties)
        info = props.get(PROPERTY)
        if not isinstance(info, dict):
            return
        if PROPERTY + "_probe" in props:
            self.probes[info["deployment"]] = props[PROPERTY + "_probe"]
        checks = self.results.setdefault(info["deployment"], {})
        check = info["check"]
        if report.when == "call" or report.outcome != "passed":
            message = ""
            if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
                message = str(report.longrepr[2])
            elif report.outcome == "failed":
                message = str(report.longreprtext).strip().splitlines()[-1] if report.longreprtext else ""
            previous = checks.get(check)
            if previous is None or previous.outcome == "passed":
                checks[check] = CheckResult(report.outcome, message, props.get(PROPERTY + "_cause"))

    def report_path(self) -> str | None:
        """The HTML report of this run (--html, or the one the reports plugin registered), else the JUnit XML."""
        option = self.config.option
        if getattr(option, "htmlpath", None):
            return str(Path(option.htmlpath).resolve())
        for plugin in self.config.pluginmanager.get_plugins():
            path = getattr(plugin, "_report_path", None)
            if isinstance(path, Path):
                return str(path)
        if getattr(option, "xmlpath", None):
            return str(Path(option.xmlpath).resolve())
        for plugin in self.config.pluginmanager.get_plugins():
            logfile = getattr(plugin, "logfile", None)
            if isinstance(logfile, str) and logfile.endswith(".xml"):
                return logfile
        return None

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        registry = Registry(registry_root(self.config))
        offline = _mode(self.config) is cassette.Mode.OFFLINE
        for deployment_id, checks in sorted(self.results.items()):
            if offline:
                # a replay proves the checks, not the host as it is now: it never changes the registry
                failed = [name for name in REQUIRED_CHECKS if name in checks and checks[name].outcome == "failed"]
                verdict = f"would fail ({', '.join(failed)})" if failed else "checks pass on the recording"
                self.decisions.append(f"{deployment_id}: offline replay: {verdict}; status unchanged (run with "
                                      "--gpu-mode live to gate it)")
                continue
            try:
                self.decide(registry, deployment_id, checks)
            except UserError as exc:
                self.decisions.append(f"{deployment_id}: not changed: {exc.line()}")

    def decide(self, registry: Registry, deployment_id: str, checks: dict[str, CheckResult]) -> None:
        deployment = registry.deployment(deployment_id)
        status = deployment.get("status")
        failures = [(name, checks[name]) for name in REQUIRED_CHECKS
                    if name in checks and checks[name].outcome == "failed"]
        missing = [name for name in REQUIRED_CHECKS if name not in checks]
        serverless = deployment.get("runtime") == "serverless" and not deployment.get("ssh")
        allowed = OPTIONAL_CHECKS | (frozenset(REQUIRED_CHECKS) - SERVERLESS_CHECKS if serverless else frozenset())
        blocked = [name for name, result in checks.items() if result.outcome == "skipped" and name not in allowed]
        probe_info = self.probes.get(deployment_id, {})
        if status not in AWAITING:
            verdict = "failed" if failures else "passed"
            self.decisions.append(f"{deployment_id}: health {verdict}; status {status} left as is "
                                  "(only health-checking deployments are gated)")
            return
        unjudged = [(name, result) for name, result in failures if result.cause in NOT_JUDGED]
        if unjudged:
            name, result = unjudged[0]
            self.decisions.append(f"{deployment_id}: NOT judged: {name}: {result.cause} (a recording, route or "
                                  "verified host key is missing: not a deployment failure); status left "
                                  "health-checking")
            return
        if failures:
            name, result = failures[0]
            count = int((deployment.get("health") or {}).get("failures", 0)) + 1
            health = {"status": "failed", "failed_at": now_ts(), "check": name, "cause": result.cause or name,
                      "message": result.message[:500], "failures": count, "failed_checks": [n for n, _ in failures],
                      "probe_digest": probe_info.get("digest"), "report": self.report_path()}
            target = "error" if count >= 2 else "health-checking"
            extra: dict[str, Any] = {"health": health}
            if target == "error":
                extra["error"] = f"health failed twice: {health['cause']}: {result.message[:200]}"
            lifecycle.transition(registry, deployment_id, target, route=probe_info.get("route"),
                                 marker=probe_info.get("digest"), note=f"health: {name} failed ({health['cause']})",
                                 next_action="investigate, fix, re-run checks/health" if target != "error"
                                 else "destroy or rebuild: failed health twice", **extra)
            self.decisions.append(f"{deployment_id}: NOT ready: {name} failed ({health['cause']}); "
                                  f"status {target} (failure {count})")
            return
        if missing or blocked:
            why = (f"checks not run: {', '.join(missing)}" if missing else "") + \
                  (f"{'; ' if missing else ''}skipped: {', '.join(blocked)}" if blocked else "")
            self.decisions.append(f"{deployment_id}: NOT ready ({why}); status left health-checking")
            return
        passed_at = now_ts()
        evidence = {"status": "passed", "passed_at": passed_at, "report": self.report_path(),
                    "probe_digest": probe_info.get("digest"), "route": probe_info.get("route"),
                    "checks": {name: checks[name].outcome for name in REQUIRED_CHECKS}, "failures": 0}
        lifecycle.transition(registry, deployment_id, "ready", route=probe_info.get("route"),
                             marker=probe_info.get("digest"), note="health: every check passed, test generation "
                             "included", next_action="run jobs", ready_at=passed_at, health=evidence)
        self.decisions.append(f"{deployment_id}: READY (probe {probe_info.get('digest', '?')[:19]})")

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.decisions:
            return
        terminalreporter.section("gpuharness ready gate")
        for line in self.decisions:
            terminalreporter.write_line(line)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "health_check: a checks/health check (one id per deployment)")
    if not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("gpuharness-ready-gate"):
        config.pluginmanager.register(ReadyGate(config), "gpuharness-ready-gate")
