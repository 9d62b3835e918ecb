"""install and configure: one batched exec per phase, sha256-verified models, journaled transitions."""

from __future__ import annotations

import hashlib

import pytest
from lifecycle_fakes import make_world
from test_provision import request

from gpuharness.core.errors import UserError
from gpuharness.core.lifecycle import read_journal
from gpuharness.operations.install import configure, install
from gpuharness.operations.provision import provision


def provisioned(tmp_path):
    world = make_world(tmp_path)
    dep_id = provision(world.ctx, request()).deployment.id
    return world, dep_id


def test_install_then_configure_reach_health_checking_with_one_exec_each(tmp_path):
    world, dep_id = provisioned(tmp_path)
    install(world.ctx, dep_id)
    assert world.registry.deployment(dep_id).status == "configuring"
    configure(world.ctx, dep_id)
    assert world.registry.deployment(dep_id).status == "health-checking"
    assert len(world.host.execs) == 2 and world.host.connections == 2
    weights = world.host.root / "gh-workspace/models/h3/weights.safetensors"
    assert weights.read_bytes() == b"weights" * 1000
    assert (world.host.root / "gh-workspace/workflows/h3-text-to-video.json").exists()
    assert (world.host.root / "gh-workspace/setup.log").exists()
    tos = [j["to"] for j in read_journal(world.registry.journal_path)]
    assert tos[-3:] == ["installing", "configuring", "health-checking"]
    assert any("1/1 verified h3/weights.safetensors" in line for line in world.said)


def test_install_redownloads_once_then_errors_on_hash_mismatch(tmp_path):
    world, dep_id = provisioned(tmp_path)
    with world.registry.update("models.json") as doc:
        doc["models"][0]["files"][0]["sha256"] = hashlib.sha256(b"other").hexdigest()
    with pytest.raises(UserError, match="checksum mismatch") as info:
        install(world.ctx, dep_id)
    assert "cause: weights_corrupt" in info.value.line()
    dep = world.registry.deployment(dep_id)
    assert dep.status == "error" and "checksum mismatch" in dep.error
    assert any("re-downloading once" in line for line in world.said)
    assert not (world.host.root / "gh-workspace/models/h3/weights.safetensors").exists()


def test_install_replaces_a_stale_cached_file(tmp_path):
    world, dep_id = provisioned(tmp_path)
    good = b"good" * 100
    source = tmp_path / "good.bin"
    source.write_bytes(good)
    with world.registry.update("models.json") as doc:
        doc["models"][0]["files"] = [{"path": "x.bin", "url": source.as_uri(),
                                      "sha256": hashlib.sha256(good).hexdigest(), "size": len(good)}]
    cached = world.host.root / "gh-workspace/models/x.bin"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"stale")
    install(world.ctx, dep_id)
    assert cached.read_bytes() == good


def test_install_skips_a_cached_file_that_verifies(tmp_path):
    world, dep_id = provisioned(tmp_path)
    install(world.ctx, dep_id)
    world2 = world
    from gpuharness.core.lifecycle import transition
    transition(world2.registry, dep_id, "error", error="test: force a re-install")
    install(world.ctx, dep_id)
    assert any("1/1 cached h3/weights.safetensors" in line for line in world.said)


def test_install_full_disk_is_classified_and_marks_error(tmp_path):
    world, dep_id = provisioned(tmp_path)
    with world.registry.update("models.json") as doc:
        doc["models"][0]["files"][0]["size"] = 10**18
    with pytest.raises(UserError, match="disk_full"):
        install(world.ctx, dep_id)
    assert world.registry.deployment(dep_id).status == "error"


def test_install_ssh_timeout_is_one_attempt_and_classified(tmp_path):
    world, dep_id = provisioned(tmp_path)
    world.host.fail_next_exec = "timeout"
    with pytest.raises(UserError, match="ssh_timeout"):
        install(world.ctx, dep_id)
    assert world.host.connections == 1 and len(world.host.execs) == 1
    assert world.registry.deployment(dep_id).status == "error"


def test_configure_refuses_before_install(tmp_path):
    world, dep_id = provisioned(tmp_path)
    with pytest.raises(UserError, match="configure needs `configuring`"):
        configure(world.ctx, dep_id)
    assert world.host.execs == []


def test_install_starts_over_after_an_install_that_died_mid_way(tmp_path):
    world, dep_id = provisioned(tmp_path)
    from gpuharness.core.lifecycle import transition
    transition(world.registry, dep_id, "installing")  # the process running it was killed
    install(world.ctx, dep_id)
    assert world.registry.deployment(dep_id).status == "configuring"
    tos = [j["to"] for j in read_journal(world.registry.journal_path)]
    assert tos[-4:] == ["installing", "error", "installing", "configuring"]
