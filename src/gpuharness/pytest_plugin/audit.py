"""The audit family: one AuditRun per session for checks/audit, the checkpoint after a passing audit, and the
spend summary at the top of the HTML report.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable
from datetime import datetime
from html import escape
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from gpuharness.audit import rules
from gpuharness.core import secrets
from gpuharness.core.clock import parse_ts, utcnow
from gpuharness.core.policy import Ceilings
from gpuharness.core.rules import Rule
from gpuharness.core.statefile import read_json
from gpuharness.core.terminal import shown
from gpuharness.pytest_plugin import cassette_dir, registry_root

if TYPE_CHECKING:  # the engine, the summary and the chart load when an audit runs: this plugin loads for every suite
    from gpuharness.audit.run import AuditRun

#: An RFC 3339 time the audit takes as "now" (idle minutes); tests and replays pin it, default: the clock.
NOW_ENV = "GPUHARNESS_AUDIT_NOW"
MARK = "gh_audit"
#: The marker by which a check names the audit rule it asserts: @pytest.mark.audit_rule(rules.LEDGER_SCHEMA).
RULE_MARK = "audit_rule"
RUN_KEY = pytest.StashKey["AuditRun"]()
SUMMARY_KEY = pytest.StashKey[dict[str, Any]]()
DEPLOYMENTS_KEY = pytest.StashKey[list[str]]()
SESSION_PLUGIN = "gpuharness-audit-session"
CHART_TITLE = "Daily billed spend, used and idle (UTC days), against daily_usd"


def audit_now() -> datetime:
    """$GPUHARNESS_AUDIT_NOW, else the current UTC time."""
    pinned = os.environ.get(NOW_ENV)
    return parse_ts(pinned) if pinned else utcnow()


def is_audit_path(path: Path) -> bool:
    """Whether a collected file belongs to the audit suite (checks/audit/, or gpuharness/_checks/audit/ in a wheel)."""
    parts = path.parts
    return any(a in ("checks", "_checks") and b == "audit" for a, b in itertools.pairwise(parts))


def missing_registry_line(root: Path) -> str:
    return (f"gpuharness audit: registry {root} not found: pass --registry DIR (or set $GPUHARNESS_REGISTRY), or run "
            "`gpuharness init`")


def refuse_missing_registry(config: pytest.Config) -> None:
    """An audit of no registry checked nothing: one usage error (exit 4), not one error per check."""
    root = registry_root(config)
    if not root.is_dir():
        raise pytest.UsageError(missing_registry_line(root))


def audit_run(config: pytest.Config) -> AuditRun:
    """The session's audit, computed once."""
    run = config.stash.get(RUN_KEY, None)
    if run is None:
        from gpuharness.audit.run import run_audit
        from gpuharness.audit.summary import summarize

        root = registry_root(config)
        if not root.is_dir():
            pytest.fail(missing_registry_line(root), pytrace=False)
        reports = Path(config.invocation_params.dir) / "reports"
        run = run_audit(root, audit_now(), secret_roots={rules.SECRETS_CASSETTES: cassette_dir(config),
                                                         rules.SECRETS_REPORTS: reports})
        config.stash[RUN_KEY] = run
        config.stash[SUMMARY_KEY] = summarize(run)
    return run


def _ceiling(summary: dict[str, Any]) -> float | None:
    return Ceilings.from_document(summary["policy"]).daily_usd


@pytest.fixture(scope="session")
def audit(pytestconfig: pytest.Config) -> AuditRun:
    """The audit of the registry under test (every rule evaluated once per session)."""
    return audit_run(pytestconfig)


@pytest.fixture
def audit_rule(request: pytest.FixtureRequest) -> Rule:
    """The audit rule a check asserts: the one it declares with @pytest.mark.audit_rule, or, for a check
    parametrized over a group of rules (`over_rules`), each of them."""
    marker = request.node.get_closest_marker(RULE_MARK)
    if marker is None or not marker.args or not isinstance(marker.args[0], Rule):
        pytest.fail(f"{request.node.nodeid}: an audit check names its rule with @pytest.mark.{RULE_MARK}(RULE) or "
                    "is parametrized over rules (over_rules)", pytrace=False)
    rule: Rule = marker.args[0]
    return rule


def over_rules(group: Iterable[Rule]) -> pytest.MarkDecorator:
    """Parametrize a check over a group of the audit table, each test id the rule's short name."""
    return pytest.mark.parametrize("audit_rule", list(group), ids=rules.short_name)


def _deployment_ids(config: pytest.Config) -> list[str]:
    """The deployments the per-deployment checks are parametrized over (read once per session)."""
    known = config.stash.get(DEPLOYMENTS_KEY, None)
    if known is None:
        try:
            doc = read_json(registry_root(config) / "deployments.json")
            known = [str(d["id"]) for d in doc["deployments"] if isinstance(d, dict) and "id" in d]
        except Exception:  # the schema check reports a broken file; here we only need test ids
            known = []
        config.stash[DEPLOYMENTS_KEY] = known
    wanted = config.getoption("--deployment") or []
    return [i for i in known if not wanted or i in wanted]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "audit_deployment" in metafunc.fixturenames:
        metafunc.parametrize("audit_deployment", _deployment_ids(metafunc.config))


def audit_verdict_html(failed: list[str], checked: int) -> str:
    """The audit's verdict, first in audit.html and in its static HTML: PASSED, or FAILED with the failed rules."""
    if failed:
        names = ", ".join(escape(node.rsplit("::", 1)[-1]) for node in failed[:10])
        return (f'<h2 id="gpuharness-verdict" style="color:#cf222e">Verdict: FAILED: {len(failed)} of {checked} '
                f'audit checks: {names}</h2>')
    return f'<h2 id="gpuharness-verdict" style="color:#1a7f37">Verdict: PASSED: {checked} audit checks</h2>'


class AuditSession:
    """Tracks the audit tests of this session (on the controller) and writes the checkpoint if all passed."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.collected = 0
        self.deselected = 0
        self.failed: list[str] = []
        #: audit tests reported (on the controller under xdist, where no collection happens)
        self.reported: set[str] = set()
        self.checkpoint_note: str | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            if is_audit_path(Path(item.path)):
                item.add_marker(MARK)
                self.collected += 1
        if self.collected:
            refuse_missing_registry(self.config)

    def pytest_deselected(self, items: list[pytest.Item]) -> None:
        self.deselected += sum(1 for item in items if is_audit_path(Path(item.path)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if hasattr(self.config, "workerinput"):
            return
        if MARK not in report.keywords and not is_audit_path(Path(report.nodeid.split("::")[0])):
            return
        self.reported.add(report.nodeid)
        if report.failed:
            self.failed.append(report.nodeid)

    def partial(self) -> bool:
        """Whether only part of the audit ran (then the checkpoint would attest unchecked things)."""
        config = self.config
        return bool(self.deselected or config.getoption("--deployment") or config.getoption("keyword", "")
                    or config.getoption("markexpr", "") or config.getoption("lf", False)
                    or config.getoption("deselect", None))

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        config = self.config
        if hasattr(config, "workerinput"):
            summary = config.stash.get(SUMMARY_KEY, None)
            if summary is not None:
                config.workeroutput["gh_audit_summary"] = summary  # type: ignore[attr-defined]
            return
        if not self.reported:
            return
        self.checkpoint_note = self._write_checkpoint(session, exitstatus)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        summary = getattr(node, "workeroutput", {}).get("gh_audit_summary")
        if summary is not None:
            self.config.stash[SUMMARY_KEY] = summary

    def _write_checkpoint(self, session: pytest.Session, exitstatus: int) -> str | None:
        config = self.config
        if self.failed or exitstatus != 0 or session.testsfailed:
            return None
        if self.partial() or session.shouldstop or session.shouldfail:
            return "audit checkpoint not written: only part of the audit ran"
        run = config.stash.get(RUN_KEY, None)
        if run is None:  # under xdist the workers audited; the controller audits again and must pass too
            run = audit_run(config)
        return run.attest()

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        run = self.config.stash.get(RUN_KEY, None)
        if run is not None:
            mode = "incremental" if run.incremental else "full"
            terminalreporter.write_line(f"gpuharness audit: {run.state.line_count} ledger lines, "
                                        f"{run.lines_validated} validated ({mode})")
            terminalreporter.write_line(f"gpuharness audit anchor: {run.anchor}")
            for warning in run.warnings[:20]:
                terminalreporter.write_line(shown(f"gpuharness audit warning: {warning}"))
        if self.checkpoint_note:
            terminalreporter.write_line(self.checkpoint_note)

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_results_summary(self, prefix: list[str], summary: list[str], postfix: list[str]) -> None:
        data = self.config.stash.get(SUMMARY_KEY, None)
        if data is None or not self.reported:
            return
        from gpuharness.audit.spend_chart import daily_spend_png
        from gpuharness.audit.summary import IDLE, USED, to_html

        prefix.insert(0, secrets.redact(audit_verdict_html(sorted(set(self.failed)), len(self.reported))))
        chart = daily_spend_png(data["day_use"], _ceiling(data), title=CHART_TITLE, order=(USED, IDLE))
        prefix.append(secrets.redact(to_html(data, chart)))

    @pytest.hookimpl(optionalhook=True)
    def pytest_html_report_title(self, report: Any) -> None:
        if any(is_audit_path(Path(str(arg).split("::")[0]).resolve()) for arg in self.config.args):
            root = registry_root(self.config)
            report.title = secrets.redact(f"gpuharness audit of {root}")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARK}: a check of the audit suite (checks/audit)")
    config.addinivalue_line("markers", f"{RULE_MARK}(rule): the audit rule (gpuharness.audit.rules) a check asserts")
    if not config.pluginmanager.has_plugin(SESSION_PLUGIN):
        config.pluginmanager.register(AuditSession(config), SESSION_PLUGIN)
    if not hasattr(config, "workerinput") and any(is_audit_path(Path(str(arg).split("::")[0]).resolve())
                                                  for arg in config.args):
        refuse_missing_registry(config)  # on the controller, before xdist starts workers
