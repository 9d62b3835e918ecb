"""`gpuharness validate` checks the journal and reap's observations line by line, like the ledger."""

import json
import subprocess
import sys

from gpuharness.core.registry import Registry


def validate(root):
    return subprocess.run([sys.executable, "-m", "gpuharness", "validate", "--registry", str(root)],
                          capture_output=True, text=True, timeout=60)


def test_good_journal_and_observations_are_counted(tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    registry.journal_path.write_text(json.dumps({"ts": "2026-11-30T10:00:00Z", "deployment": "d", "from": None,
                                                 "to": "provisioning"}) + "\n")
    (registry.root / "observations.jsonl").write_text(json.dumps(
        {"deployment": "d", "observed_at": "2026-11-30T10:05:00Z", "status": "ready", "running_jobs": []}) + "\n")
    done = validate(registry.root)
    assert done.returncode == 0, done.stderr
    assert "ok transitions.jsonl: 1 lines" in done.stdout and "ok observations.jsonl: 1 lines" in done.stdout


def test_a_bad_observation_is_one_line_naming_its_line_and_field(tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    path = registry.root / "observations.jsonl"
    good = json.dumps({"deployment": "d", "observed_at": "2026-11-30T10:05:00Z", "status": "ready"})
    path.write_text(good + "\n" + json.dumps({"deployment": "d", "observed_at": "yesterday", "status": "ready"}) + "\n")
    before = path.read_bytes()
    done = validate(registry.root)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.count("\n") == 1
    assert f"{path}:2:$.observed_at: 'yesterday' is not a 'date-time'" in done.stderr
    assert path.read_bytes() == before


def test_a_broken_journal_line_is_one_line_naming_its_line(tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    registry.journal_path.write_text('{"ts": "2026-11-30T10:00:00Z", "deployment": \n')
    done = validate(registry.root)
    assert done.returncode == 2 and f"{registry.journal_path}:1:1: invalid JSON" in done.stderr
