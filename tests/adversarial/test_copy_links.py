"""A copy never follows a link, on either side (issue 17, class 3).

`retrieve` runs against a real simulated host, reached over SSH and SFTP, whose job output folder hypothesis fills
with regular files, symbolic links (to a private key outside the workspace, to folders, dangling, chains), hard
links, FIFOs, folders and hostile names (too long for a file system, holding a line separator). The local side gets
links and hard links planted at targets, at folders and at the old temporary names, and, while a transfer runs, a
folder swapped for a link or every temporary file swapped for a link. Then: nothing outside `--to` is written,
nothing outside the workspace is read, every regular artifact is synced with its checksum under its path relative
to the output folder, every refused one gets one line with its reason, and the ledger marks synced only what is on
disk here with that checksum.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest
from health_world import HealthWorld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from made_keys import private_key_pem

from gpuharness.core.deployment import DEFAULT_WORKSPACE, Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry
from gpuharness.operations.retrieve import retrieve
from gpuharness.operations.seams import cli_context
from gpuharness.probe import server_catalog, transcripts
from gpuharness.probe.guard_state import GUARD_DIR
from gpuharness.remote import ExecResult
from gpuharness.remote.route import HostRoute
from gpuharness.sim import host as sim_host
from gpuharness.sim.host import HostSpec
from gpuharness.sim.runtimes import RuntimeFaults

HOST = "dep_links"
#: what the host holds at an artifact's remote path, and the reason a refusal names (None: a regular file, synced)
HOST_KINDS: dict[str, str | None] = {
    "file": None, "link": "symbolic link", "link_folder": "symbolic link", "dangling": "symbolic link",
    "chain": "symbolic link", "hard": "hard link", "fifo": "not a regular file", "folder": "not a regular file"}
#: what is planted on this side before the retrieve
LOCAL_KINDS = (None, None, "link_target", "hard_target", "link_folder", "link_old_temp")
FOLDERS: tuple[tuple[str, ...], ...] = ((), ("a",), ("b",), ("a", "c"))
NAMES = ("x.png", "x.png.part", "out.png", "-x.png", "x y.png")
#: names no file system here can hold or no line can carry: (the name from a token, the reason a refusal names)
HOSTILE: dict[str, tuple[Callable[[str], str], str]] = {
    "long": (lambda token: token + "L" * 300 + ".png", "too long"),
    "u2028": (lambda token: token + "\u2028name.png", "line separator"),
    "u2029": (lambda token: token + "\u2029name.png", "line separator"),
    "newline": (lambda token: token + "\nname.png", "line separator"),
    "return": (lambda token: token + "\rname.png", "line separator"),
}
#: names the job schema refuses (C0 controls): their job's line is written by another writer, on its own
UNSCHEMED = {"newline", "return"}


@dataclasses.dataclass(frozen=True)
class Planned:
    """One artifact of an example: where it is on the host, what is there, and what waits for it here."""

    folder: tuple[str, ...]
    name: str
    host: str = "file"
    local: str | None = None
    race: str | None = None  # "swap_folder" | "swap_temp": done while its transfer runs
    hostile: str | None = None  # a HOSTILE kind: the name is that, the host file a plain one

    @property
    def rel(self) -> str:
        return "/".join((*self.folder, self.name))


@st.composite
def examples(draw: st.DrawFn) -> list[Planned]:
    spots = draw(st.lists(st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)), min_size=1, max_size=6,
                          unique=True))
    kinds = st.sampled_from(("file",) * 6 + tuple(sorted(HOST_KINDS)))  # a regular file half the time
    planned = [Planned(folder, name, draw(kinds), draw(st.sampled_from(LOCAL_KINDS))) for folder, name in spots]
    planned = [dataclasses.replace(p, local=None) if p.host != "file" else p for p in planned]
    for kind in draw(st.lists(st.sampled_from(sorted(HOSTILE)), max_size=3, unique=True)):
        planned.append(Planned((), f"hostile-{kind}.bin", hostile=kind))
    race = draw(st.sampled_from((None, "swap_folder", "swap_temp")))
    if race is not None:  # the raced one has a folder of its own, so the swap touches no other artifact
        planned.append(Planned(("r",), draw(st.sampled_from(NAMES)), race=race))
    return planned


@dataclasses.dataclass
class Example:
    """One attack: a fresh workspace on the host, a deployment for it, its jobs, and a fresh --to here."""

    number: int
    world: HealthWorld
    root: Path
    planned: list[Planned]
    said: list[str] = dataclasses.field(default_factory=list)

    @property
    def deployment(self) -> str:
        return f"dep_copy_{self.number}"

    @property
    def workspace(self) -> Path:
        return self.world.hosts[HOST].root / f"ws-{self.number}"

    @property
    def to(self) -> Path:
        return self.root / f"to-{self.number}"

    def job(self, artifact: Planned) -> str:
        return f"J-{self.number:05d}-{'b' if artifact.hostile in UNSCHEMED else 'a'}"

    def name(self, artifact: Planned) -> str:
        if artifact.hostile is None:
            return artifact.rel
        return HOSTILE[artifact.hostile][0](f"t{self.planned.index(artifact)}-")

    def target(self, artifact: Planned) -> Path:
        return self.to / self.job(artifact) / artifact.rel

    def label(self, artifact: Planned) -> str:
        return f"{self.job(artifact)}/{artifact.rel}"


def host_secrets(host_root: Path) -> dict[str, bytes]:
    """Files outside the workspace a link may aim at: the host's private key, a folder of keys, a chain's link."""
    secrets = {"id_ed25519": private_key_pem("openssh"),
               "private/x.png": b"a private x", "private/x.png.part": b"a private part",
               "private/out.png": b"a private out", "private/-x.png": b"a private dash",
               "private/x y.png": b"a private space", "hardlinked": b"a file hard-linked into the workspace"}
    for rel, data in secrets.items():
        path = host_root / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    if not (host_root / "chain").is_symlink():
        (host_root / "chain").symlink_to(host_root / "id_ed25519")
    return secrets


def plant_on_host(example: Example, artifact: Planned, contents: dict[Planned, bytes]) -> str:
    """What the host holds for the artifact; returns the remote path its ledger line names."""
    host_root = example.world.hosts[HOST].root
    output = example.workspace / "output"
    if artifact.hostile is not None:
        path = output / artifact.name
    elif artifact.host == "link_folder":  # a folder of the output tree that is a link to the host's keys
        keys = output.joinpath(*artifact.folder, "keys")
        keys.parent.mkdir(parents=True, exist_ok=True)
        if not keys.is_symlink():
            keys.symlink_to(host_root / "private", target_is_directory=True)
        return str(keys / artifact.name)
    else:
        path = output / artifact.rel
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = "file" if artifact.hostile is not None else artifact.host
    if kind == "file":
        data = os.urandom(len(contents) * 997 + 40_000 * (artifact.race is not None))
        contents[artifact] = data
        path.write_bytes(data)
    elif kind == "link":
        path.symlink_to(host_root / "id_ed25519")
    elif kind == "dangling":
        path.symlink_to(host_root / "nowhere")
    elif kind == "chain":
        path.symlink_to(host_root / "chain")
    elif kind == "hard":
        os.link(host_root / "hardlinked", path)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "folder":
        path.mkdir()
        (path / "inside.png").write_bytes(b"a file in a folder named like an artifact")
    return str(path)


def plant_here(example: Example, outside: Path) -> set[str]:
    """The links and hard links planted under --to before the retrieve; returns the artifact paths they block."""
    linked_folders: set[tuple[str, str]] = set()
    for artifact in example.planned:
        if artifact.local == "link_folder" and artifact.folder:
            spot = (example.job(artifact), artifact.folder[0])
            if spot not in linked_folders:
                (example.to / spot[0]).mkdir(parents=True, exist_ok=True)
                (example.to / spot[0] / spot[1]).symlink_to(outside / "dir", target_is_directory=True)
                linked_folders.add(spot)
    blocked: set[str] = set()
    for artifact in example.planned:
        under_link = artifact.folder and (example.job(artifact), artifact.folder[0]) in linked_folders
        if under_link:
            blocked.add(example.label(artifact))
            continue
        target = example.target(artifact)
        if artifact.local in ("link_target", "hard_target", "link_old_temp"):
            target.parent.mkdir(parents=True, exist_ok=True)
        if os.path.lexists(target):  # another artifact's old temporary name: a link is there already
            pass
        elif artifact.local == "link_target":
            target.symlink_to(outside / "secret.txt")
        elif artifact.local == "hard_target":
            os.link(outside / "secret.txt", target)
        elif artifact.local == "link_old_temp":
            temp = target.with_name(target.name + ".part")
            if not os.path.lexists(temp):
                temp.symlink_to(outside / "secret.txt")
            blocked.add(f"{example.label(artifact)}.part")  # an artifact named x.png.part finds a link there
        if artifact.local in ("link_target", "hard_target"):
            blocked.add(example.label(artifact))
    return blocked


class Racer:
    """The transfers' progress seam, used to change the file system here while a transfer runs."""

    def __init__(self, example: Example, outside: Path) -> None:
        self.example = example
        self.outside = outside
        self.raced = [a for a in example.planned if a.race is not None]
        self.done = False
        self.finals = {example.target(a) for a in example.planned}

    def begin(self, label: str, total: int | None, done: int = 0) -> None:
        return None

    def advance(self, label: str, done: int) -> None:
        if self.done or not self.raced or label != self.example.label(self.raced[0]):
            return
        self.done = True
        artifact, to = self.raced[0], self.example.to
        if artifact.race == "swap_folder":  # the folder the transfer lands in becomes a link to a folder outside
            folder = to / self.example.job(artifact) / "r"
            folder.rename(folder.with_name("r-moved"))
            folder.symlink_to(self.outside / "dir", target_is_directory=True)
            return
        for directory, _, files in os.walk(to):  # every temporary file becomes a link to a file outside
            for name in files:
                path = Path(directory) / name
                if path not in self.finals and stat.S_ISREG(path.lstat().st_mode):
                    path.unlink()
                    path.symlink_to(self.outside / "secret.txt")

    def end(self, label: str) -> None:
        return None

    def close(self) -> None:
        return None


def snapshot(root: Path, *, skip: tuple[Path, ...]) -> dict[str, str]:
    """Every entry under root (not following links): its kind and, for a file, its sha256."""
    found: dict[str, str] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = [d for d in dirs if not any(here / d == s or s in (here / d).parents for s in skip)]
        for name in (*dirs, *files):
            path = here / name
            info = path.lstat()
            if stat.S_ISLNK(info.st_mode):
                found[str(path)] = "link " + os.readlink(path)
            elif stat.S_ISREG(info.st_mode):
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "dir"
    return found


def write_ledger(example: Example, remote: dict[Planned, str]) -> None:
    """The jobs' lines as a runtime reports them (another writer's: appended raw, so C0 names get in too)."""
    jobs: dict[str, list[dict[str, Any]]] = {}
    for artifact in example.planned:
        jobs.setdefault(example.job(artifact), []).append(
            {"name": example.name(artifact), "remote_path": remote[artifact]})
    with example.world.registry.ledger_path.open("a", encoding="utf-8") as handle:
        for job, artifacts in sorted(jobs.items()):
            handle.write(json.dumps({
                "id": job, "deployment_id": example.deployment, "provider": "vast", "status": "completed",
                "started_at": "2026-12-01T10:00:00Z", "completed_at": "2026-12-01T10:01:00Z",
                "ts": "2026-12-01T10:01:00Z", "artifacts": artifacts}) + "\n")


def add_deployment(example: Example) -> None:
    host = example.world.hosts[HOST]
    record = {**example.world.deployment(HOST), "id": example.deployment, "instance_id": f"inst-{example.number}",
              "ssh": {**host.ssh_block(), "workspace": str(example.workspace)}}
    with example.world.registry.update("deployments.json") as doc:
        doc["deployments"].append(record)


def expected_refusal(example: Example, artifact: Planned, blocked: set[str]) -> str | None:
    """The reason the artifact cannot be synced, or None. A raced one may go either way: '?'."""
    if artifact.hostile is not None:
        return HOSTILE[artifact.hostile][1]
    if HOST_KINDS[artifact.host] is not None:
        return HOST_KINDS[artifact.host]
    if example.label(artifact) in blocked:
        return "link"  # a symbolic link or a hard link
    return "?" if artifact.race is not None else None


def run_example(example: Example, outside: Path, opened: list[str]) -> None:
    example.workspace.mkdir(parents=True)
    add_deployment(example)
    contents: dict[Planned, bytes] = {}
    remote = {a: plant_on_host(example, a, contents) for a in example.planned}
    write_ledger(example, remote)
    example.to.mkdir()
    blocked = plant_here(example, outside)
    skip = (example.world.root, example.to)
    before = snapshot(example.root, skip=skip)
    # the shutdown guard configure armed writes its heartbeat and log on the pod as it runs
    host_skip = (example.workspace, example.world.hosts[HOST].root / DEFAULT_WORKSPACE / GUARD_DIR)
    host_before = snapshot(example.world.hosts[HOST].root, skip=host_skip)
    ctx = dataclasses.replace(cli_context(example.world.registry), say=example.said.append,
                              transfers=Racer(example, outside))
    opened.clear()
    try:
        retrieve(ctx, example.deployment, example.to, deadline_s=60)
    except UserError as exc:
        example.said.append(f"error: {exc.what}")
    # nothing outside --to was written, nothing outside the workspace read (or changed) on the host
    assert snapshot(example.root, skip=skip) == before, example.said
    assert snapshot(example.world.hosts[HOST].root, skip=host_skip) == host_before
    workspace = str(example.workspace.resolve()) + os.sep
    assert [path for path in opened if not path.startswith(workspace)] == [], example.said
    secrets = {hashlib.sha256(data).hexdigest() for data in host_secrets(example.world.hosts[HOST].root).values()}
    assert not any(s in line for s in secrets for line in example.said)
    check_outcome(example, blocked, contents, secrets)


def check_outcome(example: Example, blocked: set[str], contents: dict[Planned, bytes], secrets: set[str]) -> None:
    ledger = Ledger(example.world.registry.ledger_path)
    records = {job: ledger.current(job) for job in {example.job(a) for a in example.planned}}
    marks = {(job, a["name"]): a for job, record in records.items() for a in record.get("artifacts") or []
             if a.get("synced_at")}
    lines = [line for line in example.said if not line.startswith("error: ")]
    for artifact in example.planned:
        why = expected_refusal(example, artifact, blocked)
        mark = marks.get((example.job(artifact), example.name(artifact)))
        token = f"t{example.planned.index(artifact)}-" if artifact.hostile else f"{example.label(artifact)}: "
        about = [line for line in lines if token in line and "ok" != line.rsplit(" ", 1)[-1]]
        if why is None:
            sha = hashlib.sha256(contents[artifact]).hexdigest()
            assert example.target(artifact).read_bytes() == contents[artifact], example.said
            assert mark is not None and mark["sha256"] == sha, (artifact, example.said)
            assert about == [], about
        elif why != "?":
            assert mark is None, (artifact, mark)
            assert len(about) == 1, (artifact, why, example.said)
            reasons = ("symbolic link", "hard link") if why == "link" else (why,)
            assert any(reason in about[0] for reason in reasons), (why, about)
    # the ledger marks synced only what is on disk here, a regular file of one name with the recorded checksum
    for (job, name), mark in marks.items():
        local = Path(unquote(urlparse(mark["uri"]).path))
        assert local == example.to / job / name
        info = local.lstat()
        assert stat.S_ISREG(info.st_mode) and info.st_nlink == 1, (local, info)
        assert hashlib.sha256(local.read_bytes()).hexdigest() == mark["sha256"] not in secrets


@pytest.fixture
def sftp_opens(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The real paths the simulated hosts' SFTP servers open (a link is opened where it leads)."""
    opened: list[str] = []
    original = sim_host._SandboxSFTP.open

    def spy(self: Any, path: str, flags: int, attr: Any) -> Any:
        opened.append(os.path.realpath(path if os.path.isabs(path) else os.path.join(self.root, path)))
        return original(self, path, flags, attr)

    monkeypatch.setattr(sim_host._SandboxSFTP, "open", spy)
    yield opened


def test_a_copy_never_follows_a_link_on_either_side(tmp_path: Path, sftp_opens: list[str]) -> None:
    world = HealthWorld(tmp_path / "world")
    world.add(HOST, HostSpec(runtime=None), status="ready")
    host_secrets(world.hosts[HOST].root)
    outside = tmp_path / "outside"
    (outside / "dir").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(b"the user's own file, outside --to\n")
    (outside / "dir" / "kept.txt").write_bytes(b"a file in a folder outside --to\n")
    numbers = itertools.count(1)

    @settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
    @given(planned=examples())
    def attack(planned: list[Planned]) -> None:
        run_example(Example(next(numbers), world, tmp_path, planned), outside, sftp_opens)

    try:
        attack()
    finally:
        world.close()


def cli(world: HealthWorld, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(world.registry.root)],
                          capture_output=True, text=True, timeout=120, cwd=world.root)


def test_outputs_named_alike_in_two_folders_are_two_artifacts(tmp_path: Path) -> None:
    """A ComfyUI saves x.png in folders a and b, and x.png and x.png.part at the top: four artifacts, each synced
    under its path relative to the output folder, none taken for another or for a temporary file."""
    names = (("a", "x.png"), ("b", "x.png"), ("", "x.png"), ("", "x.png.part"))
    world = HealthWorld(tmp_path / "world")
    world.add(HOST, HostSpec(runtime_faults=RuntimeFaults(hostile_names=names, polls_before_done=0)),
              status="ready")
    to = tmp_path / "to"
    try:
        ran = cli(world, "run", HOST, "--inputs", "{}", "--poll", "0.05")
        retrieved = cli(world, "retrieve", HOST, "--to", str(to))
        output = world.hosts[HOST].workspace / "output"
        [job] = [r for r in Ledger(world.registry.ledger_path).current().values()]
        for sub, name in names:
            local = to / job["id"] / sub / name if sub else to / job["id"] / name
            assert local.read_bytes() == (output / sub / name).read_bytes(), (ran.stderr, retrieved.stderr)
    finally:
        world.close()
    assert ran.returncode == 0 and retrieved.returncode == 0, (ran.stderr, retrieved.stderr)
    assert sorted(a["name"] for a in job["artifacts"]) == ["a/x.png", "b/x.png", "x.png", "x.png.part"]
    assert all(a["synced_at"] for a in job["artifacts"])


@pytest.mark.sshd
def test_a_real_openssh_host_gives_no_file_through_a_link(sshd: tuple[HostRoute, Path, bool], tmp_path: Path) -> None:
    """The same rule against OpenSSH's own sshd and sftp-server: an output folder holding a link to the login's
    private key, a folder link to the folder that holds it, a hard link and a FIFO gives none of them; the regular
    file beside them is synced."""
    route, directory, has_sftp = sshd
    if not has_sftp:
        pytest.skip("this sshd has no sftp-server")
    workspace = directory / "ws"
    output = workspace / "output"
    (output / "sub").mkdir(parents=True)
    (output / "sub" / "real.png").write_bytes(b"a real output" * 100)
    (output / "key.png").symlink_to(directory / "client_key")
    (output / "keys").symlink_to(directory, target_is_directory=True)
    os.link(directory / "authorized_keys", output / "hard.png")
    os.mkfifo(output / "fifo.png")
    for path in (workspace, output, output / "sub", output / "sub" / "real.png"):
        os.chown(path, os.stat(directory).st_uid, os.stat(directory).st_gid, follow_symlinks=False)
    registry = Registry(tmp_path / "registry")
    registry.init()
    ssh = {"host": route.host, "port": route.port, "user": route.user, "key_file": route.key_file,
           "known_hosts": route.known_hosts, "workspace": str(workspace)}
    with registry.update("deployments.json") as doc:
        doc["deployments"].append({"id": "dep_openssh", "provider": "owned", "instance_id": "box", "status": "ready",
                                   "cost_hr": 0.0, "created_at": "2026-12-01T10:00:00Z", "ssh": ssh,
                                   "shutdown_rule": {"idle_minutes": 30}})
    names = ("sub/real.png", "key.png", "keys/client_key", "hard.png", "fifo.png")
    with registry.ledger_path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "J-1", "deployment_id": "dep_openssh", "status": "completed",
                                 "ts": "2026-12-01T10:01:00Z",
                                 "artifacts": [{"name": n, "remote_path": str(output / n)} for n in names]}) + "\n")
    said: list[str] = []
    to = tmp_path / "to"
    with pytest.raises(UserError, match="4 artifact"):
        retrieve(dataclasses.replace(cli_context(registry), say=said.append), "dep_openssh", to, deadline_s=60)
    assert (to / "J-1" / "sub" / "real.png").read_bytes() == b"a real output" * 100
    assert sorted(p.relative_to(to).as_posix() for p in to.rglob("*")) == ["J-1", "J-1/sub", "J-1/sub/real.png"]
    for name, reason in (("key.png", "symbolic link"), ("keys/client_key", "symbolic link"),
                         ("hard.png", "hard links"), ("fifo.png", "FIFO")):
        [line] = [line for line in said if f"J-1/{name}: " in line]
        assert reason in line, line
    [record] = Ledger(registry.ledger_path).current().values()
    assert [a["name"] for a in record["artifacts"] if a.get("synced_at")] == ["sub/real.png"]


@settings(max_examples=60, deadline=None, database=None)
@given(spot=st.sampled_from(("transcript", "ssh", "catalogs", "catalog")), kind=st.sampled_from(("link", "hard")),
       dep=st.sampled_from(("dep_a", "dep-b.1", "x" * 200)))
def test_a_recording_never_writes_through_a_link(spot: str, kind: str, dep: str) -> None:
    """Record mode writes a probe transcript (cassettes/ssh/<deployment>.json) and a server catalog
    (cassettes/ssh/catalogs/sha256-<hex>.json). A link or a hard link planted at either file, or a link in place of
    either folder, is refused with one line (each write beneath it), and the file it points to is not changed."""
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        cassettes, outside = root / "cassettes", root / "outside"
        (outside / "folder").mkdir(parents=True)
        (outside / "secret.txt").write_bytes(b"the user's own file\n")
        catalog = {"KSampler": {"input": {"required": {}}}}
        digest = hashlib.sha256(json.dumps(catalog, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
        places = {"transcript": cassettes / "ssh" / f"{dep}.json", "ssh": cassettes / "ssh",
                  "catalogs": transcripts.catalog_dir(cassettes),
                  "catalog": transcripts.catalog_dir(cassettes) / f"sha256-{digest}.json"}
        place = places[spot]
        place.parent.mkdir(parents=True, exist_ok=True)
        folder = spot in ("ssh", "catalogs")
        if kind == "link":
            place.symlink_to(outside / "folder" if folder else outside / "secret.txt", target_is_directory=folder)
        elif folder:
            return  # a folder has no hard links of its own
        else:
            os.link(outside / "secret.txt", place)
        before = snapshot(outside, skip=())
        deployment = Deployment.from_json({"id": dep, "provider": "owned", "status": "ready", "cost_hr": 0.0})
        route = HostRoute(target=dep, host="127.0.0.1", port=22)
        refused: list[str] = []
        for write in (lambda: server_catalog.store(catalog, transcripts.catalog_dir(cassettes), None,
                                                   below=cassettes),
                      lambda: transcripts.write(transcripts.transcript_path(cassettes, dep), deployment, route,
                                                ExecResult("out", "", 0, False, 0.1), "0" * 32, ())):
            try:
                write()
            except UserError as exc:
                refused.append(exc.line())
        assert snapshot(outside, skip=()) == before
        assert len(refused) == (2 if spot == "ssh" else 1), refused  # ssh/ holds both files
        assert all("\n" not in line and ("symbolic link" if kind == "link" else "hard links") in line
                   for line in refused), refused


def test_a_file_swapped_for_a_link_after_it_was_looked_at_is_not_read(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """SFTP cannot open without following a link. The host swaps the output for a link to its private key after
    the listing and after SFTP's lstat, just before the open: the open file is not the one looked at, so not a
    byte of it is read, nothing is synced, and the line says why."""
    world = HealthWorld(tmp_path / "world")
    host = world.add(HOST, HostSpec(runtime=None), status="ready")
    secret = host_secrets(host.root)
    output = host.workspace / "output" / "x.png"
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(b"the real output" * 50)
    with world.registry.ledger_path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"id": "J-swap", "deployment_id": HOST, "status": "completed",
                                 "ts": "2026-12-01T10:01:00Z",
                                 "artifacts": [{"name": "x.png", "remote_path": str(output)}]}) + "\n")
    read_from: list[str] = []
    opening, reading = sim_host._SandboxSFTP.open, sim_host._StallingHandle.read

    def swap_then_open(self: Any, path: str, flags: int, attr: Any) -> Any:
        if not output.is_symlink():
            output.unlink()
            output.symlink_to(host.root / "id_ed25519")
        return opening(self, path, flags, attr)

    def spy(self: Any, offset: int, length: int) -> Any:
        read_from.append(self.filename)
        return reading(self, offset, length)

    monkeypatch.setattr(sim_host._SandboxSFTP, "open", swap_then_open)
    monkeypatch.setattr(sim_host._StallingHandle, "read", spy)
    said: list[str] = []
    try:
        with pytest.raises(UserError, match="1 artifact"):
            retrieve(dataclasses.replace(cli_context(world.registry), say=said.append), HOST, tmp_path / "to",
                     deadline_s=60)
    finally:
        world.close()
    assert read_from == [], read_from
    assert not any(hashlib.sha256(secret["id_ed25519"]).hexdigest()[:12] in line for line in said)
    [line] = [line for line in said if "J-swap/x.png: " in line]
    assert "not the file" in line or "symbolic link" in line, line
    assert not (tmp_path / "to" / "J-swap" / "x.png").exists()
