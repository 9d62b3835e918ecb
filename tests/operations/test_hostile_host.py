"""Hostile hosts: a simulated ComfyUI whose /history names outputs outside its output folder, and a ledger whose
artifact names climb out of `--to`. The real CLI runs the job and `retrieve` over real SSH/SFTP; nothing may appear
outside the base directory, which the tests prove by listing the file system around it before and after."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from health_world import HealthWorld

from gpuharness.core.base_dir import BaseDir
from gpuharness.core.confinement import plain_name, relative_parts, remote_within
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.sim.host import HostSpec
from gpuharness.sim.runtimes import RuntimeFaults

DEP = "dep_hostile"


def listing(root: Path, *, skip: tuple[Path, ...] = ()) -> dict[str, int]:
    """Every file and directory under root (path -> size, -1 for a directory), except the skipped trees."""
    found: dict[str, int] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = [d for d in dirs if not any((here / d) == s or s in (here / d).parents for s in skip)]
        for name in dirs:
            found[str(here / name)] = -1
        for name in files:
            found[str(here / name)] = (here / name).lstat().st_size
    return found


def cli(world: HealthWorld, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(world.registry.root)],
                          capture_output=True, text=True, timeout=120, cwd=world.root)


@pytest.fixture
def around(tmp_path):
    """The directory around the base: retrieve writes into around/to, a hostile name aims at around/."""
    base = tmp_path / "around"
    (base / "to").mkdir(parents=True)
    (base / "keep.txt").write_text("the user's own file\n")
    return base


def hostile_world(tmp_path: Path, names: tuple[tuple[str, str], ...]) -> HealthWorld:
    world = HealthWorld(tmp_path / "world")
    world.add(DEP, HostSpec(runtime_faults=RuntimeFaults(hostile_names=names, polls_before_done=0)),
              status="ready")
    return world


def test_a_hostile_comfyui_output_name_writes_nothing_outside_the_retrieve_base(tmp_path, around):
    """The ComfyUI names outputs `../../pwned.png` and an absolute path aimed at the directory around `--to`;
    both files exist on the host where those names lead. Neither `run` nor `retrieve` writes outside `--to`."""
    aimed = around / "pwned.png"
    world = hostile_world(tmp_path, (("", "../../pwned.png"), ("", str(aimed))))
    try:
        before = listing(tmp_path, skip=(world.root,))
        ran = cli(world, "run", DEP, "--inputs", "{}", "--poll", "0.05")
        ledger = list(Ledger(world.registry.ledger_path).records())
        retrieved = cli(world, "retrieve", DEP, "--to", str(around / "to"))
        after = listing(tmp_path, skip=(world.root,))
    finally:
        world.close()
    assert not aimed.exists()
    assert {p: s for p, s in after.items() if p not in before} == {}, (ran.stderr, retrieved.stderr)
    assert after == before
    # the job is recorded as failed with the refused name, never as an artifact to sync
    assert ran.returncode == 1, ran.stderr
    assert ledger[-1]["status"] == "failed" and not ledger[-1].get("artifacts")
    assert "../../pwned.png" in ledger[-1]["error"] and "climbs out" in ledger[-1]["error"]
    assert retrieved.returncode == 0 and "nothing to retrieve" in retrieved.stderr


def test_retrieve_refuses_ledger_artifact_names_that_leave_the_base(tmp_path, around):
    """Lines another writer put in jobs.jsonl (the schema now refuses them on append) name artifacts `../../x`,
    an absolute path, and a job id that climbs; the host really has files at those remote paths. retrieve syncs
    the one honest artifact, refuses the others with one line each, and writes nothing outside `--to`."""
    world = hostile_world(tmp_path, ())
    host = world.hosts[DEP]
    ws = host.workspace
    (ws / "output").mkdir(parents=True, exist_ok=True)
    for name in ("honest.png", "x.png"):
        (ws / "output" / name).write_bytes(b"png " + name.encode())
    aimed = around / "pwned.png"
    named = [("J-000001", "honest.png"), ("J-000002", "../../x.png"), ("J-000003", str(aimed)),
             ("../../J-climb", "x.png")]
    lines = [{"id": job, "deployment_id": DEP, "status": "completed", "ts": f"2026-12-01T10:00:0{i}Z",
              "artifacts": [{"name": name, "remote_path": f"{ws}/output/{'honest.png' if i == 0 else 'x.png'}"}]}
             for i, (job, name) in enumerate(named)]
    with world.registry.ledger_path.open("a") as handle:
        handle.writelines(json.dumps(line) + "\n" for line in lines)
    try:
        before = listing(tmp_path, skip=(world.root, around / "to"))
        retrieved = cli(world, "retrieve", DEP, "--to", str(around / "to"))
        after = listing(tmp_path, skip=(world.root, around / "to"))
        inside = listing(around / "to")
    finally:
        world.close()
    assert after == before, retrieved.stderr
    assert not aimed.exists() and not (tmp_path / "x.png").exists()
    assert sorted(inside) == [str(around / "to" / "J-000001"), str(around / "to" / "J-000001" / "honest.png")]
    assert retrieved.returncode == 2
    [error] = [line for line in retrieved.stderr.splitlines() if line.startswith("gpuharness: error")]
    assert "3 artifact(s) not synced" in error and "climbs out" in error and "absolute path" in error


@pytest.mark.parametrize("name", ["", "/etc/passwd", "../x", "a/../../x", "x\x00y", "x\x1b]0;t\x07", "a\\b", ".",
                                  "a\x9bb"])
def test_a_remote_name_that_could_leave_its_base_is_refused(tmp_path, name):
    with pytest.raises(UserError):
        relative_parts(name, what="artifact")
    with pytest.raises(UserError):
        plain_name(name, what="artifact")


def test_a_symlink_already_under_the_base_does_not_lead_out(tmp_path):
    (tmp_path / "base").mkdir()
    (tmp_path / "base" / "job").symlink_to(tmp_path)
    with BaseDir(tmp_path / "base") as base, pytest.raises(UserError, match="symbolic link; not followed"):
        base.folder(("job",))


def test_a_plain_relative_name_stays_under_its_base(tmp_path):
    with BaseDir(tmp_path) as base, base.folder(("J-1", *relative_parts("sub/out.png", what="x")[:-1])) as folder:
        assert folder.path == tmp_path / "J-1/sub" and (tmp_path / "J-1/sub").is_dir()
    assert relative_parts("a//./b", what="x") == ("a", "b")
    assert remote_within("gh-workspace", "gh-workspace/output/a.png", what="x") == "gh-workspace/output/a.png"
    for outside in ("gh-workspace/../x", "/root/gh-workspace/a", "gh-workspace-2/a", "x\n"):
        with pytest.raises(UserError):
            remote_within("gh-workspace", outside, what="x")
