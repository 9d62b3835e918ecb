"""retrieve: SFTP on one connection, resumable, sha256-verified, recorded as correction lines (no rewrite)."""

from __future__ import annotations

import hashlib

import pytest
from lifecycle_fakes import FakeExecutor
from test_run import OOM, lines, ready_world

from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.operations.retrieve import PARTIAL, partial_name, retrieve, unsynced
from gpuharness.operations.run import run_job


def test_retrieve_copies_verifies_and_appends_a_correction_line(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    before = (world.registry.ledger_path).read_bytes()
    result = retrieve(world.ctx, dep_id, tmp_path / "outputs")
    local = tmp_path / "outputs" / "J-000001" / "out.png"
    remote = world.host.root / "gh-workspace/outputs/J-000001.png"
    assert local.read_bytes() == remote.read_bytes()
    after = world.registry.ledger_path.read_bytes()
    assert after.startswith(before)  # nothing rewritten
    last = lines(world)[-1]
    assert last["correction"] is True and last["reason"] == "artifacts synced"
    [artifact] = last["artifacts"]
    assert artifact["uri"] == local.as_uri() and artifact["synced_at"]
    assert artifact["sha256"] == hashlib.sha256(local.read_bytes()).hexdigest()
    assert result.bytes_transferred == local.stat().st_size
    assert world.registry.deployment(dep_id).status == "ready"
    assert world.host.connections == 1
    # one result line per file (the live bar is the terminal's: tests/operations/test_transfer_progress.py)
    assert any(f"J-000001/out.png {local.stat().st_size:,} B sha256 {artifact['sha256'][:12]} ok" in s
               for s in world.said)


def test_retrieve_resumes_a_partial_transfer(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    remote = world.host.root / "gh-workspace/outputs/J-000001.png"
    partial = tmp_path / "outputs" / PARTIAL / partial_name("J-000001", ("out.png",))
    partial.parent.mkdir(parents=True)
    partial.write_bytes(remote.read_bytes()[:100])
    result = retrieve(world.ctx, dep_id, tmp_path / "outputs")
    assert result.bytes_transferred == remote.stat().st_size - 100
    assert (tmp_path / "outputs" / "J-000001" / "out.png").read_bytes() == remote.read_bytes()
    assert not partial.exists()


def test_retrieve_refetches_a_corrupt_partial_from_byte_zero(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    partial = tmp_path / "outputs" / PARTIAL / partial_name("J-000001", ("out.png",))
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"garbage")
    retrieve(world.ctx, dep_id, tmp_path / "outputs")
    final = tmp_path / "outputs" / "J-000001" / "out.png"
    assert final.read_bytes() == (world.host.root / "gh-workspace/outputs/J-000001.png").read_bytes()
    assert any("checksum mismatch after transfer" in s for s in world.said)


def test_retrieve_reports_a_missing_remote_file_and_records_nothing(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    (world.host.root / "gh-workspace/outputs/J-000001.png").unlink()
    count = len(lines(world))
    with pytest.raises(UserError, match="missing on the host"):
        retrieve(world.ctx, dep_id, tmp_path / "outputs")
    assert len(lines(world)) == count
    assert unsynced(Ledger(world.registry.ledger_path), dep_id)
    assert world.registry.deployment(dep_id).status == "ready"


def test_retrieve_with_nothing_to_sync_opens_no_connection(tmp_path):
    world, dep_id = ready_world(tmp_path)
    world.executor = FakeExecutor(world.host, fail_logs=[OOM])
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    connections = world.host.connections
    assert retrieve(world.ctx, dep_id, tmp_path / "o").synced == []
    assert world.host.connections == connections


def test_retrieve_never_overwrites_a_different_local_file(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    mine = tmp_path / "outputs" / "J-000001" / "out.png"
    mine.parent.mkdir(parents=True)
    mine.write_bytes(b"a file the user put here")
    with pytest.raises(UserError, match="exists with other content; not overwritten"):
        retrieve(world.ctx, dep_id, tmp_path / "outputs")
    assert mine.read_bytes() == b"a file the user put here"
    assert unsynced(Ledger(world.registry.ledger_path), dep_id)


def test_retrieve_records_an_identical_local_copy_without_transferring(tmp_path):
    world, dep_id = ready_world(tmp_path)
    run_job(world.ctx, dep_id, inputs={}, poll_s=1)
    copy = tmp_path / "outputs" / "J-000001" / "out.png"
    copy.parent.mkdir(parents=True)
    copy.write_bytes((world.host.root / "gh-workspace/outputs/J-000001.png").read_bytes())
    result = retrieve(world.ctx, dep_id, tmp_path / "outputs")
    assert result.bytes_transferred == 0 and len(result.synced) == 1
