"""One runtime table (core/runtimes.py), filled by each runtime's own module: the schemas, the CLI and every layer
read runtimes from it, so adding a runtime is its module in gpuharness.runtimes (its entry and its client), its
simulator half (sim/<name>.py) and, for jobs, its executor (operations/<name>_job.py)."""

from __future__ import annotations

import argparse
import json
import re

from checkout import ROOT

from gpuharness.cli import build_parser
from gpuharness.core import schema
from gpuharness.core.runtimes import RUNTIMES, generating, names
from gpuharness.sim.simulated_runtime import half_of

SRC = ROOT / "src" / "gpuharness"
NAMES = names()
GENERATING = generating()
#: where a runtime's name may be written: its own module (runtimes/) and its simulator half (sim/<name>.py)
OWNERS = ("runtimes/",)
SIMULATOR_HALVES = frozenset(f"sim/{name}.py" for name in NAMES if half_of(name) is not None)
#: the files outside those that still name a runtime, each for a reason of its own (a runtime added touches none
#: of them): `workflow add|check|show`'s ComfyUI graph and its default --runtime (cli/workflow_cmds), a log's
#: source (diagnose), the demo's estate. The run phase's executors and the plan's node-catalog rule read the table.
STILL_NAMING: frozenset[str] = frozenset({"cli/workflow_cmds.py", "diagnose/diagnosis.py", "demo/tour.py",
                                         "demo/stops_itself.py"})
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


def test_the_schemas_enumerate_exactly_the_tables_runtimes_and_their_files_name_none():
    deployments = schema.load_schema("deployments")["properties"]["deployments"]["items"]["properties"]["runtime"]
    workflows = schema.load_schema("workflows")["properties"]["workflows"]["items"]["properties"]["runtime"]
    assert deployments["enum"] == [*NAMES, None] and workflows["enum"] == list(NAMES)
    for name in ("deployments", "workflows"):
        written = json.loads((SRC / "core" / "schemas" / f"{name}.schema.json").read_text())
        runtime = written["properties"][name]["items"]["properties"]["runtime"]
        assert "enum" not in runtime and runtime[schema.TABLE_KEYWORD] == "runtimes", name


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
    assert naming == STILL_NAMING, "a runtime's name written outside its own module: read it from the table"


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
