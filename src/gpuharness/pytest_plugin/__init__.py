"""The gpuharness pytest plugin: every option of the check suites is declared here, in one place.

Check families (health, audit, plan) add their own fixtures in their submodules, listed in FAMILIES.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.registry import ENV_VAR, Registry
from gpuharness.pytest_plugin.suites import may_collect_health

#: Plugin-shaped modules of the check families, loaded with this plugin.
FAMILIES: tuple[str, ...] = (
    "gpuharness.pytest_plugin.audit",
    "gpuharness.pytest_plugin.reports",
    "gpuharness.pytest_plugin.plan",
    "gpuharness.pytest_plugin.inventory",
    "gpuharness.pytest_plugin.health",
    "gpuharness.pytest_plugin.steps",
)
#: Loaded only when the run may collect health checks (its probe and runtime imports are most of the plugin's).
HEALTH_FAMILY = "gpuharness.pytest_plugin.health"

MODES = ("offline", "live", "record")
MODE_ENV = "GPUHARNESS_GPU_MODE"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuharness", "gpuharness: GPU workload verification")
    group.addoption("--registry", metavar="DIR", default=None,
                    help=f"registry directory (default: ${ENV_VAR} or .pi/gpu)")
    group.addoption("--gpu-mode", choices=MODES, default=os.environ.get(MODE_ENV) or "offline",
                    help=f"offline replays cassettes (default, or ${MODE_ENV}); live talks to providers and hosts; "
                         "record is live and also writes scrubbed cassettes")
    group.addoption("--deployment", action="append", default=[], metavar="ID",
                    help="only check this deployment (repeatable)")
    group.addoption("--plan", metavar="FILE", default=None, help="plan file for checks/plan")
    group.addoption("--cassettes", metavar="DIR", default=None,
                    help="cassette directory (default: ./cassettes)")


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("--gpu-mode") not in MODES:
        raise pytest.UsageError(f"${MODE_ENV}={os.environ.get(MODE_ENV)!r}: expected one of {', '.join(MODES)}")
    _check_deployment_ids(config)
    Registry(registry_root(config))  # its providers' keys are redacted from every report and line of this run
    health = may_collect_health([str(arg) for arg in config.args], Path(config.invocation_params.dir))
    for name in FAMILIES:
        if name == HEALTH_FAMILY and not health:
            continue
        if not config.pluginmanager.has_plugin(name):
            config.pluginmanager.import_plugin(name)


#: hypothesis' pytest plugin, and the report fields through which its tests (here or on xdist workers) pass it data.
HYPOTHESIS_PLUGIN = "hypothesispytest"
HYPOTHESIS_REPORT_KEYS = ("_hypothesis_stats", "_hypothesis_failing_examples")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Spare hypothesis' terminal summary when no hypothesis test ran: it imports hypothesis only to find
    it has nothing to say. Nothing is lost: it reports only observations (which need hypothesis imported),
    statistics or failing examples carried on reports, and none of those exists here."""
    manager = session.config.pluginmanager
    plugin = manager.get_plugin(HYPOTHESIS_PLUGIN)
    if plugin is None or "hypothesis" in sys.modules or _hypothesis_option(session.config):
        return
    reporter = manager.get_plugin("terminalreporter")
    stats: dict[str, list[Any]] = getattr(reporter, "stats", {}) if reporter is not None else {}
    if any(key in getattr(report, "__dict__", {}) for reports in stats.values() for report in reports
           for key in HYPOTHESIS_REPORT_KEYS):
        return
    manager.unregister(plugin)


def _hypothesis_option(config: pytest.Config) -> bool:
    """Whether any --hypothesis-* option was given (hypothesis' summary then has its say)."""
    return any(value for name, value in vars(config.option).items() if name.startswith("hypothesis"))


def _check_deployment_ids(config: pytest.Config) -> None:
    """--deployment must name known deployments (a broken registry is left for the audit to report)."""
    chosen: list[str] = config.getoption("--deployment") or []
    if not chosen:
        return
    registry = Registry(registry_root(config))
    try:
        known = {d.id for d in registry.deployments()}
    except UserError:
        return
    unknown = [i for i in chosen if i not in known]
    if unknown:
        raise pytest.UsageError(f"{registry.path('deployments.json')}: no deployment {unknown[0]!r} "
                                f"(known: {', '.join(sorted(known)) or 'none'})")


def registry_root(config: pytest.Config) -> Path:
    """--registry, else $GPUHARNESS_REGISTRY, else .pi/gpu (relative to the invocation dir)."""
    explicit = config.getoption("--registry")
    root = Registry.locate(explicit).root
    if not root.is_absolute():
        root = Path(config.invocation_params.dir) / root
    return root


def cassette_dir(config: pytest.Config) -> Path:
    explicit = config.getoption("--cassettes") or os.environ.get("GPUHARNESS_CASSETTES")
    root = Path(explicit) if explicit else Path("cassettes")
    if not root.is_absolute():
        root = Path(config.invocation_params.dir) / root
    return root


@pytest.fixture(scope="session")
def gh_registry(pytestconfig: pytest.Config) -> Registry:
    """The registry under test."""
    return Registry(registry_root(pytestconfig))


@pytest.fixture(scope="session")
def gpu_mode(pytestconfig: pytest.Config) -> str:
    """offline, live or record."""
    mode: str = pytestconfig.getoption("--gpu-mode")
    return mode


@pytest.fixture(scope="session")
def gh_cassettes(pytestconfig: pytest.Config) -> Path:
    """The cassette directory."""
    return cassette_dir(pytestconfig)
