"""The fixtures every test folder shares: a fresh registry, builders of valid records, the provider simulator, the
health world (simulated hosts behind a registry) and a real OpenSSH sshd."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from secrets import token_hex
from typing import Any

import openssh_server
import pytest
from health_world import HealthWorld

from gpuharness.core.registry import Registry
from gpuharness.remote.route import HostRoute
from gpuharness.sim.server import Simulator


def build_job(job_id: str = "J-000001", status: str = "completed", **fields: Any) -> dict[str, Any]:
    """A valid ledger line (the shape users already write); fields override."""
    record: dict[str, Any] = {
        "id": job_id, "deployment_id": "dep_a", "provider": "vast", "model": "minimax-h3",
        "workflow": "h3-text-to-video", "workflow_version": 1, "status": status,
        "started_at": "2026-11-02T10:00:00Z", "ts": "2026-11-02T10:03:12Z", "gpu": "RTX 4090",
    }
    if status == "completed":
        record.update(completed_at="2026-11-02T10:03:12Z", duration_s=192.0, cost_usd=0.0373,
                      artifacts=[{"name": "out.mp4", "uri": "s3://bucket/out.mp4",
                                  "synced_at": "2026-11-02T10:03:20Z"}])
    if status == "failed":
        record.update(completed_at="2026-11-02T10:01:00Z", duration_s=60.0, cost_usd=0.0117,
                      error="CUDA out of memory")
    record.update(fields)
    return record


def build_deployment(dep_id: str = "dep_a", status: str = "ready", **fields: Any) -> dict[str, Any]:
    """A valid deployments.json item; fields override."""
    item: dict[str, Any] = {
        "id": dep_id, "provider": "vast", "instance_id": "inst-1", "gpu": "RTX 4090", "runtime": "comfyui",
        "model": "minimax-h3", "endpoint": "http://127.0.0.1:8188", "status": status, "cost_hr": 0.70,
        "created_at": "2026-11-02T09:00:00Z", "shutdown_rule": {"idle_minutes": 15},
    }
    item.update(fields)
    return item


@pytest.fixture
def registry(tmp_path: Path) -> Registry:
    """A fresh registry made by `init`, with one provider and one ready deployment."""
    reg = Registry(tmp_path / ".pi" / "gpu")
    reg.init()
    with reg.update("providers.json") as doc:
        doc["providers"].append({"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"})
    with reg.update("deployments.json") as doc:
        doc["deployments"].append(build_deployment())
    return reg


@pytest.fixture
def job_line() -> Any:
    """Builder of valid ledger lines: job_line("J-1", "running", cost_usd=None)."""
    return build_job


@pytest.fixture
def deployment_item() -> Any:
    """Builder of valid deployments.json items: deployment_item("dep_b", "destroyed", ...)."""
    return build_deployment


@pytest.fixture
def seeded_simulator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The provider simulator and a registry seeded for it (seeded_world.seed_world), run from tmp_path."""
    from seeded_world import seed_world

    from gpuharness.providers import cassette
    from gpuharness.sim.server import Simulator

    monkeypatch.setenv(cassette.TEST_SECRET_ENV, "gh-test-" + token_hex(20))
    monkeypatch.chdir(tmp_path)
    with Simulator(ready_delay_s=0.0) as sim:
        registry = Registry(tmp_path / "registry")
        seed_world(sim, registry)
        yield sim, registry


@pytest.fixture
def sim_options() -> dict[str, Any]:
    """The keyword arguments the `sim` fixture gives Simulator; a module overrides this fixture to change them."""
    return {"ready_delay_s": 0.0}


@pytest.fixture
def sim(sim_options: dict[str, Any]) -> Iterator[Simulator]:
    """The provider simulator serving on a free loopback port (instances run at once unless sim_options says)."""
    with Simulator(**sim_options) as simulator:
        yield simulator


@pytest.fixture
def world(tmp_path: Path) -> Iterator[HealthWorld]:
    """A health world under tmp_path: add deployments with `world.add(dep_id, HostSpec(...))`; hosts stop after."""
    made = HealthWorld(tmp_path / "world")
    yield made
    made.close()


@pytest.fixture
def sshd() -> Iterator[tuple[HostRoute, Path, bool]]:
    """A real OpenSSH sshd on a free loopback port: (its route, its folder, whether it serves SFTP). Skips where
    none can run, and fails there instead under GPUHARNESS_REQUIRE_SSHD=1 (CI installed one)."""
    yield from openssh_server.running()
