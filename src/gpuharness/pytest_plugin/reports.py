"""Reports for every check suite: unless the user passed --html or --junitxml, a run of checks/<suite> writes
reports/<suite>-<UTC time>.html (self-contained, pytest-html) and reports/<suite>-<UTC time>.xml (JUnit),
relative to the invocation directory. Every test report is redacted (core.secrets) as it is made, before the
terminal, the JUnit XML or the HTML report reads it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Generator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from gpuharness.core import secrets
from gpuharness.core.clock import utcnow
from gpuharness.pytest_plugin.suites import suite_of

REPORTS_DIR = "reports"


def suite_name(args: list[str], invocation_dir: Path) -> str | None:
    """The suite of the collected paths: `audit` for checks/audit/... (or _checks/audit/ in a wheel), joined with
    '+' for several."""
    suites = [suite for suite in (suite_of(arg, invocation_dir) for arg in args) if suite is not None]
    return "+".join(dict.fromkeys(suites)) if suites else None


def report_paths(directory: Path, suite: str, now: datetime) -> tuple[Path, Path]:
    """Fresh (html, xml) paths for a suite run; a second run within the same second gets a suffix."""
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    for attempt in range(1, 1000):
        suffix = "" if attempt == 1 else f"-{attempt}"
        html = directory / f"{suite}-{stamp}{suffix}.html"
        xml = directory / f"{suite}-{stamp}{suffix}.xml"
        if not html.exists() and not xml.exists():
            return html, xml
    raise RuntimeError(f"no free report name in {directory}")


def _register_html(config: pytest.Config, path: Path) -> None:
    from pytest_html.basereport import BaseReport
    from pytest_html.report_data import ReportData
    from pytest_html.selfcontained_report import SelfContainedReport
    from pytest_html.util import _process_css, _read_template

    if any(isinstance(plugin, BaseReport) for plugin in config.pluginmanager.get_plugins()):
        return
    import pytest_html

    resources = Path(pytest_html.__file__).parent / "resources"
    report = SelfContainedReport(str(path), config, ReportData(config), _read_template([resources]),
                                 _process_css(resources / "style.css", []))
    config.pluginmanager.register(report, "gpuharness-html-report")


def _register_junit(config: pytest.Config, path: Path) -> None:
    from _pytest.junitxml import LogXML, xml_key

    if config.stash.get(xml_key, None) is not None:
        return
    xml = LogXML(str(path), config.option.junitprefix, config.getini("junit_suite_name"),
                 config.getini("junit_logging"), config.getini("junit_duration_report"),
                 config.getini("junit_family"), config.getini("junit_log_passing_tests"))
    config.stash[xml_key] = xml
    config.pluginmanager.register(xml, "gpuharness-junit-report")


def pytest_configure(config: pytest.Config) -> None:
    if hasattr(config, "workerinput"):  # the xdist controller writes the reports
        return
    invocation = Path(config.invocation_params.dir)
    suite = suite_name([str(a) for a in config.args], invocation)
    if suite is None:
        return
    user_html = bool(config.getoption("htmlpath", None))
    user_xml = bool(config.getoption("xmlpath", None))
    if user_html or user_xml:
        return
    directory = invocation / REPORTS_DIR
    directory.mkdir(parents=True, exist_ok=True)
    html, xml = report_paths(directory, suite, utcnow())
    if config.pluginmanager.has_plugin("html"):  # absent under `-p no:html`
        _register_html(config, html)
    _register_junit(config, xml)


def run_report(config: pytest.Config) -> str | None:
    """The report of this run, as evidence: the HTML report (--html, or the one registered here), else the JUnit XML."""
    option = config.option
    if getattr(option, "htmlpath", None):
        return str(Path(option.htmlpath).resolve())
    for plugin in config.pluginmanager.get_plugins():
        path = getattr(plugin, "_report_path", None)  # pytest-html's report
        if isinstance(path, Path):
            return str(path)
    if getattr(option, "xmlpath", None):
        return str(Path(option.xmlpath).resolve())
    for plugin in config.pluginmanager.get_plugins():
        logfile = getattr(plugin, "logfile", None)  # pytest's LogXML
        if isinstance(logfile, str) and logfile.endswith(".xml"):
            return logfile
    return None


#: The parts of a report that carry text from the run: the failure (longrepr), the captured output (sections), the
#: properties (user_properties: JUnit) and pytest-html's extras.
REPORT_TEXT = ("longrepr", "sections", "user_properties", "extras", "extra")


def redacted(value: Any) -> Any:
    """value with every string in it redacted: strings, lists, tuples, dicts and pytest's dataclass reprs (their
    fields changed in place)."""
    if isinstance(value, str):
        return secrets.redact(value)
    if isinstance(value, list):
        return [redacted(v) for v in value]
    if isinstance(value, tuple):
        return tuple(redacted(v) for v in value)
    if isinstance(value, dict):
        return {k: redacted(v) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for field in dataclasses.fields(value):
            object.__setattr__(value, field.name, redacted(getattr(value, field.name)))
    return value


def redact_report(report: pytest.TestReport | pytest.CollectReport) -> None:
    """Redact a report's text in place (REPORT_TEXT)."""
    for name in REPORT_TEXT:
        if getattr(report, name, None) is not None:
            setattr(report, name, redacted(getattr(report, name)))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]
                              ) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    redact_report(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Generator[None, pytest.CollectReport,
                                                                         pytest.CollectReport]:
    report = yield
    redact_report(report)
    return report
