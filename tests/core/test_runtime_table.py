"""One runtime table (core/runtimes.py): the schemas, the CLI and every layer read runtimes from it, so adding a
runtime is the table's entry, one client module (gpuharness.runtimes) and its simulator half (one module of
gpuharness.sim, which the table names)."""

from __future__ import annotations

import argparse
import json
import re

from checkout import ROOT

from gpuharness.cli import build_parser
from gpuharness.core.runtimes import GENERATING, NAMES, RUNTIMES

SRC = ROOT / "src" / "gpuharness"
#: where a runtime's name may be written: the table, its clients, its simulator half (the sim module the table names)
OWNERS = ("core/runtimes.py", "runtimes/")
SIMULATOR_HALVES = frozenset(f"sim/{entry.simulator}.py" for entry in RUNTIMES.values() if entry.simulator)
#: the files outside those that still name a runtime, each for a reason of its own (a runtime added touches none
#: of them): `workflow add|check|show`'s ComfyUI graph and its default --runtime (cli/workflow_cmds), a log's
#: source (diagnose), the demo's estate. The run phase's executors and the plan's node-catalog rule read the table.
STILL_NAMING: frozenset[str] = frozenset({"cli/workflow_cmds.py", "diagnose/diagnosis.py", "demo/tour.py"})
LITERAL = re.compile("|".join(rf"[\"']{re.escape(name)}[\"']" for name in NAMES))


def _runtime_choices(parser: argparse.ArgumentParser) -> dict[str, tuple[str, ...]]:
    """Every subcommand's --runtime choices."""
    found: dict[str, tuple[str, ...]] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update({f"{name} {k}".strip(): v for k, v in _runtime_choices(sub).items()})
        elif "--runtime" in action.option_strings and action.choices is not None:
            found[""] = tuple(action.choices)
    return found


def test_the_published_schemas_enumerate_exactly_the_tables_runtimes():
    schemas = SRC / "core" / "schemas"
    deployments = json.loads((schemas / "deployments.schema.json").read_text())
    workflows = json.loads((schemas / "workflows.schema.json").read_text())
    dep_enum = deployments["properties"]["deployments"]["items"]["properties"]["runtime"]["enum"]
    wf_enum = workflows["properties"]["workflows"]["items"]["properties"]["runtime"]["enum"]
    assert set(dep_enum) - {None} == set(NAMES) == set(wf_enum)


def test_the_cli_offers_the_tables_runtimes():
    choices = _runtime_choices(build_parser())
    assert choices, "no --runtime option found"
    for command, offered in choices.items():
        assert offered in (NAMES, GENERATING), (command, offered)
    assert NAMES in choices.values() and GENERATING in choices.values()


def test_every_runtime_declares_what_the_layers_read():
    for name, runtime in RUNTIMES.items():
        assert runtime.name == name
        if runtime.has_host and runtime.health_path is not None:
            assert runtime.port is not None and runtime.process, name  # the probe looks for its service


def test_a_runtime_is_named_only_by_its_table_its_client_and_its_simulator_half():
    naming = set()
    for path in SRC.rglob("*.py"):
        relative = path.relative_to(SRC).as_posix()
        if relative.startswith(OWNERS) or relative in SIMULATOR_HALVES:
            continue
        if LITERAL.search(path.read_text()):
            naming.add(relative)
    assert naming == STILL_NAMING, "a runtime's name written outside core/runtimes.py: read it from the table"


def test_the_generic_simulator_names_no_runtime_only_each_runtimes_simulator_half_does():
    naming = {path.relative_to(SRC).as_posix() for path in (SRC / "sim").rglob("*.py")
              if LITERAL.search(path.read_text())}
    assert SIMULATOR_HALVES, "the table names no simulator half"
    assert naming <= SIMULATOR_HALVES, "a runtime's name written in the generic simulator: look its half up by name"
    assert all((SRC / half).is_file() for half in SIMULATOR_HALVES), SIMULATOR_HALVES


def test_the_naming_rule_catches_a_runtime_written_out():
    assert LITERAL.search('    if deployment.runtime == "openai":')
    assert LITERAL.search("Runtime('serverless')")
    assert not LITERAL.search("runtime = entry.client  # openai-compatible servers")
