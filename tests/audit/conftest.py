"""The audit tests' shared registry: a copy of the demo registry without its checkpoint."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_audit_checks import DEMO, DEMO_NOW


@pytest.fixture
def reg(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of the demo registry without its checkpoint, audited at DEMO_NOW."""
    monkeypatch.setenv("GPUHARNESS_AUDIT_NOW", DEMO_NOW)
    monkeypatch.delenv("GPUHARNESS_REGISTRY", raising=False)
    target = pytester.path / "reg"
    shutil.copytree(DEMO, target, ignore=shutil.ignore_patterns("audit", "*.lock"))
    return target
