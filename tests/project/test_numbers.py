"""NaN and absurd numbers: refused on every numeric option, in every schema, at every read and at every write, each
with one line and exit 2, before anything is launched or changed."""

from __future__ import annotations

import argparse
import math
import subprocess
import sys

import pytest

from gpuharness.cli import build_parser, main
from gpuharness.core.errors import UserError
from gpuharness.core.json_text import loads
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.providers.fields import number, timestamp

HUGE = "9" * 5000  # past Python's 4,300-digit limit for int()
ABSURD = ["nan", "NaN", "inf", "-inf", "-1", "1e400", HUGE, "-" + HUGE]


def numeric_options() -> list[tuple[list[str], str]]:
    """(command words, option) for every option of every command whose value is a number."""
    found: list[tuple[list[str], str]] = []

    def visit(parser: argparse.ArgumentParser, words: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, sub in action.choices.items():
                    visit(sub, [*words, name])
            elif action.type is not None and action.option_strings and action.type not in (str,) \
                    and getattr(action.type, "__module__", "") != "pathlib":
                found.append((words, action.option_strings[-1]))
    visit(build_parser(), [])
    return found


def test_no_numeric_option_takes_a_bare_float_or_int():
    def visit(parser: argparse.ArgumentParser) -> list[str]:
        bare = [a.dest for a in parser._actions if a.type in (float, int)]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    bare += visit(sub)
        return bare
    assert visit(build_parser()) == []
    assert len(numeric_options()) >= 30


@pytest.mark.parametrize(("words", "option"), numeric_options(), ids=lambda v: "-".join(v) if isinstance(v, list)
                         else v)
def test_every_numeric_option_refuses_nan_infinity_negatives_and_absurd_lengths(words, option, capsys):
    for value in ABSURD:
        assert main([*words, f"{option}={value}"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("gpuharness: error:") and err.count("\n") == 1 and option in err and len(err) < 400


@pytest.fixture
def estate(tmp_path):
    with SimulatedEstate(tmp_path / "lab", sleep=lambda s: None, say=lambda line: None) as lab:
        yield lab


@pytest.mark.parametrize("option", ["--cost-hr", "--idle-minutes", "--max-hours"])
def test_provision_with_nan_launches_nothing_and_writes_nothing(estate, option):
    before = estate.registry.path("deployments.json").read_bytes()
    done = estate.cli("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfy:1", "--cost-hr",
                      "0.4", "--idle-minutes", "15", option, "nan")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert estate.sim.stats()["launches"] == 0
    assert estate.registry.path("deployments.json").read_bytes() == before


@pytest.mark.parametrize("field", ["cost_hr", "idle_minutes", "max_hours"])
def test_a_provision_request_with_nan_is_refused_before_any_launch(estate, field):
    """An in-process caller (a plan, a script) gets the same refusal as the command line."""
    before = estate.registry.path("deployments.json").read_bytes()
    values = {"cost_hr": 0.4, "idle_minutes": 15.0, field: math.nan}
    with pytest.raises(UserError):
        provision(estate.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfy:1", **values),
                  up_deadline_s=5, poll_s=0.01)
    assert estate.sim.stats()["launches"] == 0
    assert estate.registry.path("deployments.json").read_bytes() == before


def test_a_write_refuses_a_value_json_cannot_carry_and_leaves_the_file(registry):
    path = registry.path("deployments.json")  # holds dep_a (conftest)
    before = path.read_bytes()
    for value, place in ((math.nan, "$.deployments[0].labels.x"), (math.inf, "$.deployments[0].labels.x"),
                         (10**400, "$.deployments[0].labels.x"), ("a\ud800", "$.deployments[0].labels.x")):
        with pytest.raises(UserError) as refused:
            registry.update_deployment("dep_a", labels={"x": value})
        assert refused.value.place == place
        assert path.read_bytes() == before
    with pytest.raises(UserError):
        registry.update_deployment("dep_a", cost_hr=math.nan)
    assert path.read_bytes() == before


def test_a_ledger_append_refuses_nan_and_huge_numbers_anywhere_in_the_line(registry):
    ledger = Ledger(registry.ledger_path)
    line = {"id": "J-1", "deployment_id": "d", "status": "queued", "ts": "2026-12-01T10:00:00Z"}
    for inputs in ({"seed": math.nan}, {"steps": [1, math.inf]}, {"seed": 10**400}, {"seed": 2**64}):
        with pytest.raises(UserError, match=r"finite|too large|64-bit"):
            ledger.append({**line, "inputs": inputs})
    assert registry.ledger_path.read_bytes() == b""


@pytest.mark.parametrize("text", ['{"cost_hr": 1e400}', '{"cost_hr": NaN}', '{"cost_hr": -Infinity}',
                                  '{"gpu_count": ' + "9" * 400 + "}", '{"gpu_count": ' + HUGE + "}"])
def test_reading_a_number_json_cannot_mean_is_one_line_with_the_place(tmp_path, text):
    with pytest.raises(UserError) as refused:
        loads(text, tmp_path / "x.json")
    assert refused.value.place == "1:" + str(text.index(":") + 3) and len(refused.value.line()) < 300


def test_a_state_file_with_a_huge_integer_is_one_line_and_exit_2(tmp_path):
    registry = Registry(tmp_path / "r")
    registry.init()
    path = registry.path("deployments.json")
    path.write_text('{"schema_version": 1, "deployments": [{"id": "d", "provider": "vast", "status": "ready", '
                    f'"cost_hr": 0.5, "gpu_count": {HUGE}}}]}}')
    done = subprocess.run([sys.executable, "-m", "gpuharness", "status", "--registry", str(registry.root)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"{path}:1:" in done.stderr and "5000 digits" in done.stderr
    line = '{"id": "J-1", "deployment_id": "d", "status": "queued", "ts": "2026-12-01T10:00:00Z", "attempt": ' \
        + HUGE + "}"
    done = subprocess.run([sys.executable, "-m", "gpuharness", "ledger", "append", "--line", line, "--registry",
                           str(registry.root)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr


def test_a_provider_number_that_is_not_finite_is_no_price():
    assert [number(v) for v in (0.74, "0.74", 3, math.nan, "nan", "inf", 10**400, "9" * 400, True, None)] == \
        [0.74, 0.74, 3.0, None, None, None, None, None, None, None]
    assert timestamp(math.nan) is None and timestamp(10**400) is None and timestamp(1e300) is None
