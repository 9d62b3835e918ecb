"""Bad input: every broken file gives one line naming the file and place, exit 2, no traceback, no change.

The fixed corpus lives in fixtures/bad/ (see its README); hypothesis adds mutated documents.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest
from checkout import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mutants import mutant

from gpuharness.cli import main
from gpuharness.core.registry import Registry

BAD = ROOT / "fixtures" / "bad"
EXPECTED: dict[str, dict[str, Any]] = json.loads((BAD / "expected.json").read_text())
PLACE = re.compile(r"^(\d+:\d+|\$\S*|\d+:\$\S*)$")


def build_template(root: Path) -> dict[str, bytes]:
    """A valid registry made through the real API: one provider, one deployment, two ledger lines."""
    reg = Registry(root)
    reg.init()
    with reg.update("providers.json") as doc:
        doc["providers"].append({"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"})
    with reg.update("deployments.json") as doc:
        doc["deployments"].append({"id": "dep_a", "provider": "vast", "instance_id": "inst-1", "gpu": "RTX 4090",
                                   "status": "ready", "cost_hr": 0.70, "created_at": "2026-11-02T09:00:00Z",
                                   "shutdown_rule": {"idle_minutes": 15}})
    lines = (BAD / "jobs.wrong-type.jsonl").read_bytes().splitlines(keepends=True)[:2]
    reg.ledger_path.write_bytes(b"".join(lines))
    return {p.name: p.read_bytes() for p in reg.root.iterdir() if not p.name.endswith(".lock")}


with tempfile.TemporaryDirectory() as _scratch:
    TEMPLATE = build_template(Path(_scratch) / "r")


def make_registry(root: Path) -> Registry:
    """A fresh copy of the valid template registry."""
    root.mkdir(parents=True)
    for name, data in TEMPLATE.items():
        (root / name).write_bytes(data)
    return Registry(root)


def fingerprint(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.iterdir()) if p.is_file()}


def cli(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuharness", *argv], capture_output=True, text=True,
                          check=False, timeout=60)


def assert_one_line_error(stderr: str, path: Path, place: str | None = None) -> None:
    assert "Traceback" not in stderr
    assert stderr.endswith("\n") and stderr.count("\n") == 1, f"not exactly one line: {stderr!r}"
    prefix = f"gpuharness: error: {path}:"
    assert stderr.startswith(prefix), stderr
    found_place = stderr[len(prefix):].split(": ", 1)[0]
    assert PLACE.match(found_place), f"no place (line:col or JSON path) in {stderr!r}"
    if place is not None:
        assert found_place == place


def test_every_corpus_file_is_listed_in_the_readme_and_the_manifest() -> None:
    files = {p.name for p in BAD.iterdir()} - {"README.md", "expected.json"}
    assert files == set(EXPECTED)
    readme = (BAD / "README.md").read_text()
    for name, case in EXPECTED.items():
        assert f"| {name} | `{case['place']}`" in readme


@pytest.mark.parametrize(("name", "command"),
                         [(name, command) for name, case in EXPECTED.items() for command in case["commands"]],
                         ids=lambda v: v if isinstance(v, str) else " ".join(v[:2]))
def test_corpus_file_gives_one_line_exit_2_and_changes_nothing(tmp_path: Path, name: str,
                                                             command: list[str]) -> None:
    case = EXPECTED[name]
    reg = make_registry(tmp_path / "r")
    target = reg.path(case["target"])
    shutil.copyfile(BAD / name, target)
    before = fingerprint(reg.root)
    done = cli(*command, "--registry", str(reg.root))
    assert done.returncode == 2, done.stdout + done.stderr
    assert_one_line_error(done.stderr, target, case["place"])
    assert case["says"] in done.stderr
    assert fingerprint(reg.root) == before
    assert done.stdout == ""


@pytest.mark.parametrize(("missing", "command"), [("deployments.json", ["validate"]),
                                                  ("policy.json", ["validate"]),
                                                  ("jobs.jsonl", ["spend"]),
                                                  ("jobs.jsonl", ["ledger", "show"])])
def test_missing_file_names_it_and_says_how_to_create_it(tmp_path: Path, missing: str, command: list[str]) -> None:
    reg = make_registry(tmp_path / "r")
    reg.path(missing).unlink()
    before = fingerprint(reg.root)
    done = cli(*command, "--registry", str(reg.root))
    assert done.returncode == 2
    assert done.stderr == (f"gpuharness: error: {reg.path(missing)}: file not found "
                           "(run `gpuharness init` to create an empty ledger)\n" if missing == "jobs.jsonl" else
                           f"gpuharness: error: {reg.path(missing)}: file not found "
                           "(run `gpuharness init` or pass --registry DIR)\n")
    assert fingerprint(reg.root) == before


def test_missing_registry_directory_is_one_line(tmp_path: Path) -> None:
    done = cli("spend", "--registry", str(tmp_path / "nowhere"))
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert str(tmp_path / "nowhere") in done.stderr
    assert not (tmp_path / "nowhere").exists()


# --- the hypothesis-generated corpus -------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**20) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6)


@st.composite
def structural_mutant(draw: st.DrawFn, document: Any) -> bytes:
    """Replace, delete or add one value somewhere in a valid document."""
    return json.dumps(draw(mutant(document, json_values, st.text(min_size=1, max_size=8))), indent=2).encode()


@st.composite
def byte_mutant(draw: st.DrawFn, data: bytes) -> bytes:
    """Delete, insert, overwrite or cut a few bytes."""
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        operation = draw(st.sampled_from(["delete", "insert", "overwrite", "cut"]))
        chunk = draw(st.binary(min_size=1, max_size=6) | st.sampled_from([b",", b"}", b"]", b'"', b"\n", b"\xff"]))
        if operation == "delete":
            data = data[:at] + data[at + len(chunk):]
        elif operation == "insert":
            data = data[:at] + chunk + data[at:]
        elif operation == "overwrite":
            data = data[:at] + chunk + data[at + len(chunk):]
        else:
            data = data[:at]
    return data


VALID = {name: TEMPLATE[name] for name in ("deployments.json", "policy.json", "jobs.jsonl")}


def mutants() -> st.SearchStrategy[tuple[str, bytes]]:
    options = []
    for name, data in VALID.items():
        options.append(byte_mutant(data).map(lambda b, n=name: (n, b)))
        if name != "jobs.jsonl":
            options.append(structural_mutant(json.loads(data)).map(lambda b, n=name: (n, b)))
    first, *rest = VALID["jobs.jsonl"].splitlines(keepends=True)
    options.append(structural_mutant(json.loads(first)).map(
        lambda b: ("jobs.jsonl", b.replace(b"\n", b"") + b"\n" + b"".join(rest))))
    return st.one_of(options)


COMMANDS = {"deployments.json": ["validate"], "policy.json": ["spend"], "jobs.jsonl": ["spend", "--by", "day"]}


def check_mutant(name: str, data: bytes, run: Any) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        reg = make_registry(Path(scratch) / "r")
        target = reg.path(name)
        target.write_bytes(data)
        before = fingerprint(reg.root)
        code, stderr = run([*COMMANDS[name], "--registry", str(reg.root)])
        assert code in (0, 2), stderr
        if code == 2:
            assert_one_line_error(stderr, target)
        else:
            assert stderr == ""
        assert fingerprint(reg.root) == before


def in_process(argv: list[str]) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(argv)
    return code, err.getvalue()


def as_process(argv: list[str]) -> tuple[int, str]:
    done = cli(*argv)
    return done.returncode, done.stderr


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_mutated_documents_give_one_line_or_pass(mutant: tuple[str, bytes]) -> None:
    check_mutant(*mutant, run=in_process)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutants())
def test_mutated_documents_through_the_real_console_script(mutant: tuple[str, bytes]) -> None:
    check_mutant(*mutant, run=as_process)


def test_registry_path_that_is_a_file_is_one_line(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "registry"
    not_a_dir.write_text("hello")
    done = cli("init", "--registry", str(not_a_dir))
    assert done.returncode == 2
    assert done.stderr == f"gpuharness: error: {not_a_dir}: exists and is not a directory " \
                          "(pass --registry DIR naming a directory)\n"
    assert not_a_dir.read_text() == "hello"


@pytest.mark.parametrize("command", [["spend"], ["validate"],
                                     ["ledger", "append", "--line", '{"id":"J-1","deployment_id":"d",'
                                                                    '"status":"queued"}']])
def test_ledger_that_is_a_directory_is_one_line(tmp_path: Path, command: list[str]) -> None:
    reg = make_registry(tmp_path / "r")
    reg.ledger_path.unlink()
    reg.ledger_path.mkdir()
    done = cli(*command, "--registry", str(reg.root))
    assert done.returncode == 2 and "Traceback" not in done.stderr and done.stderr.count("\n") == 1
    assert done.stderr.startswith(f"gpuharness: error: {reg.ledger_path}: ")
    assert "it is a directory, not a regular file" in done.stderr
