"""A step header per phase of a check suite's run, as it happens: what was collected, each deployment as its
checks start (checks/health: its probe is taken then), and the verdict. Plain lines through pytest's terminal writer
(a terminal, a CI log, a pipe alike), between pytest's own live progress; nothing for a run that is not a check
suite (the project's tests)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuharness.core.terminal import shown
from gpuharness.pytest_plugin.reports import suite_name
from gpuharness.pytest_plugin.suites import STEP_PREFIX as PREFIX
from gpuharness.pytest_plugin.suites import is_health_path

_PARAMETER = re.compile(r"\[([^\[\]]+)\]$")


def deployment_of(nodeid: str, rootdir: Path = Path()) -> str | None:
    """The deployment a health check judges, from its test id (`checks/health/...::test_x[dep_a]`, relative to the
    run's rootdir, which `gpuharness check` and the demo set to checks/ itself), if any."""
    found = _PARAMETER.search(nodeid)
    if found is None or not is_health_path(rootdir / nodeid.split("::")[0]):
        return None
    return found.group(1)


class SuiteSteps:
    """Counts the phases once collection is done (collect, each deployment or the checks, the verdict) and writes
    the header of each as it starts."""

    def __init__(self, config: pytest.Config, suite: str) -> None:
        self.config = config
        self.suite = suite
        self.deployments: dict[str, int] = {}  # deployment -> its number of checks, in collection order
        self.items = 0
        self.started: set[str] = set()
        self.step = 0

    @property
    def total(self) -> int:
        return 2 + max(1, len(self.deployments))

    def header(self, text: str) -> None:
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        self.step += 1
        reporter.ensure_newline()
        if getattr(getattr(reporter, "_tw", None), "width_of_current_line", 0):  # after -q's dots
            reporter.write("\n")
        reporter.write_line(shown(f"{PREFIX} {self.step}/{self.total}: {self.suite}: {text}"), bold=True)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if not hasattr(self.config, "workerinput") and getattr(self.config.option, "numprocesses", None):
            return  # the workers collect: their first collection speaks for the run
        self._collected([item.nodeid for item in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if self.step == 0:
            self._collected(list(ids))

    def _collected(self, ids: list[str]) -> None:
        self.items = len(ids)
        for nodeid in ids:
            deployment = deployment_of(nodeid, self.config.rootpath)
            if deployment is not None:
                self.deployments[deployment] = self.deployments.get(deployment, 0) + 1
        mode = self.config.getoption("--gpu-mode")
        whom = (f" of {len(self.deployments)} deployment(s): {', '.join(self.deployments)}"
                if self.deployments else "")
        self.header(f"collected {self.items} check(s){whom} ({mode})")
        if not self.deployments:
            self.header(f"running {self.items} check(s)")

    def pytest_runtest_logstart(self, nodeid: str, location: Any) -> None:
        deployment = next((d for d in self.deployments if nodeid.endswith(f"[{d}]")), None)
        if deployment is None or deployment in self.started:
            return
        self.started.add(deployment)
        self.header(f"probing {deployment} for its {self.deployments[deployment]} checks")

    @pytest.hookimpl(tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        self.step = self.total - 1
        self.header("the ready gate's verdict" if self.deployments else "the verdict")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or config.pluginmanager.has_plugin("gpuharness-steps"):
        return
    suite = suite_name([str(a) for a in config.args], Path(config.invocation_params.dir))
    if suite is not None:
        config.pluginmanager.register(SuiteSteps(config, suite), "gpuharness-steps")
