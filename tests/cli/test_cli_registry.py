"""Specifications of the registry commands: init, validate, ledger append/show, spend, economics."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuharness.cli import main
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_console_script_runs_as_a_real_process(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "gpuharness", "init", "--registry", str(tmp_path / "r"), "--json"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert len(json.loads(done.stdout)["created"]) == 9


def test_init_then_validate(tmp_path: Path, capsys) -> None:
    root = str(tmp_path / "r")
    assert run(capsys, "init", "--registry", root)[0] == 0
    code, out, _ = run(capsys, "validate", "--registry", root, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["files"]["jobs.jsonl"] == {"lines": 0} and report["warnings"] == []


def test_validate_reports_unknown_fields_as_warnings_on_stdout(registry: Registry, capsys) -> None:
    doc = json.loads(registry.path("deployments.json").read_text())
    doc["deployments"][0]["team"] = "video"
    registry.path("deployments.json").write_text(json.dumps(doc))
    code, out, err = run(capsys, "validate", "--registry", str(registry.root))
    assert (code, err) == (0, "")
    assert "warning:" in out and "team" in out


def test_env_var_names_the_registry(registry: Registry, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUHARNESS_REGISTRY", str(registry.root))
    assert run(capsys, "validate")[0] == 0


def test_ledger_append_from_stdin_and_show(registry: Registry, capsys, monkeypatch, job_line) -> None:
    import io
    monkeypatch.setattr(sys, "stdin", io.StringIO(json.dumps(job_line("J-9", "running"), indent=2)))
    code, out, _ = run(capsys, "ledger", "append", "--registry", str(registry.root))
    assert code == 0 and "appended J-9 (running)" in out
    code, out, _ = run(capsys, "ledger", "append", "--registry", str(registry.root),
                       "--line", json.dumps(job_line("J-9", "completed")))
    assert code == 0
    code, out, _ = run(capsys, "ledger", "show", "--registry", str(registry.root), "--job", "J-9", "--json")
    assert json.loads(out)["status"] == "completed"
    code, out, _ = run(capsys, "ledger", "show", "--registry", str(registry.root))
    assert "J-9" in out and "completed" in out


def test_ledger_append_refuses_a_line_after_a_terminal_one(registry: Registry, capsys, job_line) -> None:
    Ledger(registry.ledger_path).append(job_line("J-1"))
    before = registry.ledger_path.read_bytes()
    code, _, err = run(capsys, "ledger", "append", "--registry", str(registry.root),
                       "--line", json.dumps(job_line("J-1", "running")))
    assert code == 2 and "only a correction" in err and err.count("\n") == 1
    assert registry.ledger_path.read_bytes() == before


def test_ledger_append_refuses_a_registry_that_does_not_exist(tmp_path: Path, capsys, job_line) -> None:
    code, _, err = run(capsys, "ledger", "append", "--registry", str(tmp_path / "typo"),
                       "--line", json.dumps(job_line()))
    assert code == 2 and "gpuharness init" in err
    assert not (tmp_path / "typo").exists()


def test_ledger_append_of_non_object_is_refused(registry: Registry, capsys) -> None:
    code, _, err = run(capsys, "ledger", "append", "--registry", str(registry.root), "--line", "[1, 2]")
    assert code == 2 and "--line" in err


def test_ledger_show_unknown_job(registry: Registry, capsys) -> None:
    code, _, err = run(capsys, "ledger", "show", "--registry", str(registry.root), "--job", "J-404")
    assert code == 2 and "no job 'J-404'" in err


def test_spend_by_day_json_matches_the_jq_recipe(registry: Registry, capsys, job_line) -> None:
    ledger = Ledger(registry.ledger_path)
    ledger.append(job_line("J-1", "running", cost_usd=None))
    ledger.append(job_line("J-1", "completed", cost_usd=0.25, completed_at="2026-11-01T10:00:00Z"))
    ledger.append(job_line("J-2", "completed", cost_usd=0.50, completed_at="2026-11-02T10:00:00Z"))
    code, out, _ = run(capsys, "spend", "--by", "day", "--json", "--registry", str(registry.root))
    payload = json.loads(out)
    assert code == 0
    used = {day: row["used"] for day, row in payload["groups"].items() if row["used"]}
    assert used == {"2026-11-01": 0.25, "2026-11-02": 0.5} and payload["used_total"] == 0.75
    assert payload["total"] >= payload["used_total"]  # billed: the live deployment's uptime, jobs or not
    assert payload["ceilings"]["daily_usd"] == 50.0


def test_spend_refuses_a_missing_ledger(registry: Registry, capsys) -> None:
    registry.ledger_path.unlink()
    code, _, err = run(capsys, "spend", "--registry", str(registry.root))
    assert code == 2 and "jobs.jsonl" in err and "file not found" in err


def test_economics_from_a_deployment_prints_the_arithmetic(registry: Registry, capsys) -> None:
    code, out, _ = run(capsys, "economics", "--registry", str(registry.root), "--deployment", "dep_a",
                       "--gap-minutes", "12", "--startup-minutes", "12")
    assert code == 0
    assert "12/60 × $0.7 = $0.1400" in out and "decision: destroy" in out


def test_economics_json(capsys) -> None:
    code, out, _ = run(capsys, "economics", "--cost-hr", "0.70", "--gap-minutes", "5", "--json")
    assert code == 0 and json.loads(out)["decision"] == "keep-alive"


@pytest.mark.parametrize("argv", [["economics", "--gap-minutes", "5"],
                                  ["economics", "--cost-hr", "-1", "--gap-minutes", "5"],
                                  ["economics", "--cost-hr", "1", "--gap-minutes", "5", "--jobs", "0"]])
def test_economics_bad_input_is_one_line_exit_2(capsys, argv: list[str]) -> None:
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1 and err.startswith("gpuharness: error:")


def test_economics_unknown_deployment(registry: Registry, capsys) -> None:
    code, _, err = run(capsys, "economics", "--registry", str(registry.root), "--deployment", "dep_zz",
                       "--gap-minutes", "5")
    assert code == 2 and "deployments.json" in err and "dep_zz" in err


def test_validate_reports_a_torn_last_line_without_touching_it(registry: Registry, capsys, job_line) -> None:
    Ledger(registry.ledger_path).append(job_line("J-1"))
    with open(registry.ledger_path, "ab") as handle:
        handle.write(b'{"id":"J-2","depl')
    before = registry.ledger_path.read_bytes()
    code, out, err = run(capsys, "validate", "--registry", str(registry.root))
    assert (code, err) == (0, "")
    assert f"warning: {registry.ledger_path}:2:1: a torn last line at byte" in out
    assert "ok jobs.jsonl: 1 lines" in out
    assert registry.ledger_path.read_bytes() == before


def test_installed_console_script_gives_one_line_errors(tmp_path: Path) -> None:
    script = shutil.which("gpuharness", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    assert script, "the gpuharness console script is not installed (pip install -e '.[dev]')"
    done = subprocess.run([script, "spend", "--registry", str(tmp_path / "none")], capture_output=True, text=True,
                          check=False)
    assert done.returncode == 2
    assert done.stderr == f"gpuharness: error: {tmp_path / 'none'}: no registry directory here " \
                          "(run `gpuharness init` or pass --registry DIR)\n"


def test_spend_by_total_prints_the_total_once(registry: Registry, capsys) -> None:
    code, out, _ = run(capsys, "spend", "--registry", str(registry.root))
    rows = [line for line in out.splitlines() if line.startswith("total ")]
    assert code == 0 and len(rows) == 1, out


def test_spend_says_no_ceiling_where_the_policy_sets_none(registry: Registry, capsys) -> None:
    registry.path("policy.json").write_text(json.dumps({"schema_version": 1, "ceilings": "none",
                                                        "reason": "a lab box paid for by the hour elsewhere"}))
    code, out, _ = run(capsys, "spend", "--registry", str(registry.root))
    assert code == 0, out
    today = next(line for line in out.splitlines() if line.startswith("today "))
    assert "(no daily_usd ceiling)" in today and "(no monthly_usd ceiling)" in today and "$0.00" not in today, out
