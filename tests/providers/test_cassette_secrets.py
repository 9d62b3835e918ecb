"""With a planted API key, record against the simulator, then grep cassettes, logs and reports: it is nowhere."""

from __future__ import annotations

import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

from checkout import ROOT

from gpuharness.plans.recorded_world import layout, record
from gpuharness.providers import cassette

CHECKS = ROOT / "checks"


def _hits(root: Path, secret: str) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_planted_key_is_in_no_cassette_log_or_report(tmp_path, monkeypatch, caplog, pytester):
    secret = "gh-test-" + secrets.token_hex(20)
    monkeypatch.setenv(cassette.TEST_SECRET_ENV, secret)
    world = layout(tmp_path / "world")
    with caplog.at_level(logging.DEBUG):
        record(world)
    assert world.inventory.exists() and world.plan_cassette.exists()
    assert "REDACTED" in world.inventory.read_text()
    assert secret not in caplog.text

    status = subprocess.run([sys.executable, "-m", "gpuharness", "status", "--refresh", "--gpu-mode", "offline",
                             "--registry", str(world.registry), "--cassette", str(world.inventory), "--json"],
                            capture_output=True, text=True, env=os.environ, timeout=120)
    assert status.returncode == 0, status.stderr
    assert secret not in status.stdout + status.stderr

    result = pytester.runpytest(str(CHECKS / "plan"), str(CHECKS / "audit" / "test_inventory.py"), "--plan",
                                str(world.plan), "--registry", str(world.registry), "--cassettes",
                                str(world.inventory.parent.parent), "-p", "no:cacheprovider", "-v",
                                f"--junitxml={pytester.path / 'reports' / 'junit.xml'}")
    result.assert_outcomes(passed=21)
    assert secret not in "\n".join(result.outlines + result.errlines)
    assert (pytester.path / "reports" / "junit.xml").exists()
    assert _hits(tmp_path, secret) == []
    assert _hits(pytester.path, secret) == []
