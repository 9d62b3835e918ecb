"""checks/health support: one test per check of the health table and per deployment, the facts each check reads
(the probe is taken once per deployment per run, across xdist workers, by probe.session), and the ready gate
(health.gate over the pure ready decision), run once at session end on the controller."""

from __future__ import annotations

from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.core.terminal import shown
from gpuharness.health import gate
from gpuharness.health.checks_table import HEALTH_CHECKS, TEST_PREFIX
from gpuharness.health.readiness import CheckResult
from gpuharness.probe import targets
from gpuharness.probe.session import ProbeSession
from gpuharness.providers.cassette import Mode
from gpuharness.pytest_plugin import cassette_dir, registry_root
from gpuharness.pytest_plugin.health_target import FACTS, FACTS_SECTION, PROPERTY, HealthTarget
from gpuharness.pytest_plugin.reports import run_report
from gpuharness.pytest_plugin.suites import is_health_path
from gpuharness.pytest_plugin.verdicts import health_row, health_table
from gpuharness.runtimes.comfyui.workflow_fit import catalog_fetch


def selected_deployments(config: pytest.Config) -> list[str]:
    """--deployment IDs, else every deployment awaiting health."""
    chosen: list[str] = config.getoption("--deployment") or []
    registry = Registry(registry_root(config))
    if chosen:
        ids = list(dict.fromkeys(chosen))
        for deployment in registry.deployments():
            if deployment.id in ids and deployment.status == "destroyed":  # its host may be someone else's now
                raise UserError(f"deployment {deployment.id} is destroyed: its instance is gone, so there is no "
                                f"host to check; next: {gate.next_step(deployment)}",
                                path=registry.path("deployments.json"))
        return ids
    if not registry.path("deployments.json").exists():
        return []
    return [d.id for d in registry.deployments() if d.status in gate.AWAITING]


def nothing_checked_line(root: Path, skip_reason: str) -> str:
    """The one line that says why a health run checked no deployment, and what to run."""
    head = "gpuharness health: FAILED: no deployment was checked: "
    if not root.is_dir():
        return (head + f"registry {root} not found; pass --registry DIR (or set $GPUHARNESS_REGISTRY), "
                "or run `gpuharness init` then `gpuharness provision`")
    why = skip_reason or f"no deployment awaiting health in {root / 'deployments.json'}"
    return head + why.removeprefix("Skipped: ")


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "health_deployment_id" not in metafunc.fixturenames:
        return
    name = metafunc.function.__name__
    if HEALTH_CHECKS.check_of(name) is None:  # the gate would wait for it forever: say so now
        pytest.fail(f"{metafunc.definition.path}::{name} is not a check of the health table: declare it in "
                    "gpuharness.health.checks_table, or name it test_<id> after one of the table's checks",
                    pytrace=False)
    try:
        ids = selected_deployments(metafunc.config)
        if ids:
            _check_manifests(metafunc.config)
    except UserError as exc:  # the registry's error, in one line naming the file and the field
        refused: str | None = exc.line()
    else:
        refused = None
    if refused is not None:
        pytest.fail(refused, pytrace=False)
    if not ids:  # unknown --deployment ids are refused in pytest_configure
        registry = Registry(registry_root(metafunc.config))
        reason = (f"no deployment awaiting health in {registry.path('deployments.json')} (statuses "
                  f"{', '.join(sorted(gate.AWAITING))}); run `gpuharness provision`, "
                  "or pass --deployment ID to check one")
        metafunc.parametrize("health_deployment_id",
                             [pytest.param("", marks=pytest.mark.skip(reason=reason))], ids=["none"])
        return
    metafunc.parametrize("health_deployment_id", ids, ids=ids)


_MANIFESTS_READ = pytest.StashKey[bool]()


def _check_manifests(config: pytest.Config) -> None:
    """models.json and workflows.json must read (schema included) before any check runs: a broken manifest is the
    registry's error, named by file and field, never "deployment has no workflow manifest"."""
    if config.stash.get(_MANIFESTS_READ, False):
        return
    registry = Registry(registry_root(config))
    for file_name in targets.MANIFESTS:
        registry.items(file_name)
    config.stash[_MANIFESTS_READ] = True


def _manifests(registry: Registry, deployment: Deployment) -> tuple[dict[str, Any] | None,
                                                                       dict[str, Any] | None] | str:
    """The deployment's model and workflow manifests, or the one line saying which manifest does not read."""
    try:
        return (targets.manifest(registry, "models.json", "name", deployment.model),
                targets.manifest(registry, "workflows.json", "id", deployment.workflow))
    except UserError as exc:
        return exc.line()


def shared_dir(config: pytest.Config) -> Path:
    """A directory shared by the controller and every xdist worker of this run (not across runs)."""
    factory = config._tmp_path_factory  # type: ignore[attr-defined]
    base: Path = factory.getbasetemp()
    path = (base.parent if hasattr(config, "workerinput") else base) / "gpuharness-health"
    path.mkdir(parents=True, exist_ok=True)
    return path


def _mode(config: pytest.Config) -> Mode:
    return Mode.parse(config.getoption("--gpu-mode"))


@pytest.fixture
def health(request: pytest.FixtureRequest, health_deployment_id: str) -> Iterator[HealthTarget]:
    """The deployment under check, with its probe (taken once per deployment per run, across workers)."""
    config = request.config
    name: str = request.node.originalname  # type: ignore[attr-defined]
    check = HEALTH_CHECKS[name.removeprefix(TEST_PREFIX)].id  # pytest_generate_tests refused any other name
    request.node.user_properties.append((PROPERTY, {"deployment": health_deployment_id, "check": check}))
    registry = Registry(registry_root(config))
    deployment = registry.deployment(health_deployment_id)
    manifests = _manifests(registry, deployment)
    if isinstance(manifests, str):  # changed since collection: the registry's error, not the deployment's
        request.node.user_properties.append((PROPERTY + "_cause", "bad_manifest"))
        pytest.fail(manifests, pytrace=False)
    model, workflow = manifests
    session = ProbeSession(registry, _mode(config), cassette_dir(config), shared_dir(config),
                           catalogs=catalog_fetch(registry))
    record = session.probe(deployment)
    if record.transcript is not None:
        request.node.user_properties.append((PROPERTY + "_probe", {"digest": record.transcript.digest,
                                                                   "route": record.route}))
    yield HealthTarget(deployment=deployment, registry=registry, policy=Policy(registry.policy_document()),
                       mode=session.mode, cassettes=session.cassettes, record=record, node=request.node,
                       model=model, workflow=workflow)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """A health check's report shows the facts it judged, passing or failing (instead of "No log output
    captured"): a section of the call's report, which the HTML report and -rA print."""
    report = yield
    facts = [str(value) for name, value in item.user_properties if name == FACTS]
    if report.when == "call" and facts:
        report.sections.append((FACTS_SECTION, "\n".join(facts)))
    return report


def _message(report: pytest.TestReport) -> str:
    if report.outcome == "skipped" and isinstance(report.longrepr, tuple):
        return str(report.longrepr[2])
    if report.outcome == "failed" and report.longreprtext:
        return str(report.longreprtext).strip().splitlines()[-1]
    return ""


class ReadyGate:
    """Collects each check's outcome on the controller; at session end hands them to the ready gate."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, dict[str, CheckResult]] = {}
        self.probes: dict[str, dict[str, Any]] = {}
        self.figures: dict[str, dict[str, Any]] = {}
        self.lines: list[str] = []
        self.rows: list[tuple[str, str, str, str, str]] = []
        #: whether this session ran checks/health at all, and the first reason a check was skipped
        self.ran = False
        self.skip_reason = ""
        self.nothing_checked: str | None = None

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if is_health_path(Path(report.nodeid.split("::")[0])):
            self.ran = True
            if report.skipped and not self.skip_reason:
                self.skip_reason = _message(report)
        props: dict[str, Any] = dict(report.user_properties)
        info = props.get(PROPERTY)
        if not isinstance(info, dict):
            return
        if PROPERTY + "_probe" in props:
            self.probes[info["deployment"]] = props[PROPERTY + "_probe"]
        if PROPERTY + "_performance" in props:
            self.figures[info["deployment"]] = props[PROPERTY + "_performance"]
        checks = self.results.setdefault(info["deployment"], {})
        if report.when == "call" or report.outcome != "passed":
            previous = checks.get(info["check"])
            if previous is None or previous.outcome == "passed":  # a teardown error outranks the call's pass
                checks[info["check"]] = CheckResult(report.outcome, _message(report), props.get(PROPERTY + "_cause"))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        self._refuse_nothing_checked(session)
        registry = Registry(registry_root(self.config))
        offline = _mode(self.config) is Mode.OFFLINE
        for deployment_id, results in sorted(self.results.items()):
            figures = self.figures.get(deployment_id)
            if offline:
                self.lines.append(gate.offline_verdict(deployment_id, results))
            else:
                probe = self.probes.get(deployment_id, {})
                evidence = gate.RunEvidence(probe.get("digest"), probe.get("route"), run_report(self.config),
                                            figures)
                self.lines.append(gate.conclude(registry, deployment_id, results, evidence))
            self.rows.append(health_row(deployment_id, self.lines[-1], results, figures))
            if figures is not None:  # the GPU against its class, in the report's summary
                self.lines.append(f"  {deployment_id} GPU: {figures.get('message')}")

    def _refuse_nothing_checked(self, session: pytest.Session) -> None:
        """A health run that judged no check of any deployment is not a pass: exit 1, with the one line why."""
        judged = any(r.outcome != "skipped" for results in self.results.values() for r in results.values())
        if not self.ran or judged or session.exitstatus != pytest.ExitCode.OK:
            return
        self.nothing_checked = nothing_checked_line(registry_root(self.config), self.skip_reason)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str]) -> None:
        """The verdicts first in health.html, as static HTML (pytest-html draws its own table with JavaScript)."""
        if self.rows:
            prefix.insert(0, health_table(self.rows))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.nothing_checked:
            terminalreporter.write_line(shown(self.nothing_checked), red=True)
        if self.lines:
            terminalreporter.section("gpuharness ready gate")
            for line in self.lines:
                terminalreporter.write_line(shown(line))  # messages quote hosts' logs and runtimes' answers


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "health_check: a checks/health check (one id per deployment)")
    if not hasattr(config, "workerinput") and not config.pluginmanager.has_plugin("gpuharness-ready-gate"):
        config.pluginmanager.register(ReadyGate(config), "gpuharness-ready-gate")
