"""Shell injection and traversal through every script the project sends (install, configure, run, retrieve, reap,
probe): hostile values from models.json, workflows.json, job inputs, the ledger and the deployment record, each sent
by the real CLI (or the probe runner) to a real simulated host over SSH, whose /bin/sh runs them. A marker file the
injected command would create must not exist, and nothing may appear outside the host's workspace and the registry,
which the tests prove by listing the file system around them before and after."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from health_world import HealthWorld

from gpuharness import probe
from gpuharness.core.errors import UserError
from gpuharness.remote.connect import HostRoute, open_remote
from gpuharness.remote.script import ShellScript, quote
from gpuharness.sim.host import HostSpec, SimHost
from gpuharness.sim.runtimes import RuntimeFaults

DEP = "dep_inject"


def listing(root: Path, *, skip: tuple[Path, ...] = ()) -> dict[str, int]:
    """Every file and directory under root (path -> size, -1 for a directory), except the skipped trees."""
    found: dict[str, int] = {}
    for directory, dirs, files in os.walk(root):
        here = Path(directory)
        dirs[:] = [d for d in dirs if here / d not in skip]
        for name in dirs:
            found[str(here / name)] = -1
        for name in files:
            found[str(here / name)] = (here / name).lstat().st_size
    return found


def hostile(marker: Path) -> list[str]:
    """Values that run `touch marker` if they ever reach a shell unquoted, or leave their directory."""
    return [f"$(touch {marker})", f"`touch {marker}`", f"'; touch {marker}; '", f'"; touch {marker}; "',
            f"x && touch {marker}", f"-x; touch {marker}", f"$(cd; touch {marker.name})"]


class World:
    """A registry and one simulated host; `changed()` lists what appeared outside the workspace and registry."""

    def __init__(self, tmp_path: Path, spec: HostSpec | None = None, status: str = "ready", **fields) -> None:
        self.tmp_path = tmp_path
        self.marker = tmp_path / "INJECTED"
        self.health = HealthWorld(tmp_path / "world")
        self.host = self.health.add(DEP, spec, status=status, **fields)
        self.registry = self.health.registry
        self.before = self.around()

    def start(self) -> None:
        """The file system around the workspace and the registry as the attempts find it."""
        self.before = self.around()

    def around(self) -> dict[str, int]:
        return listing(self.tmp_path, skip=(self.host.workspace, self.registry.root))

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "gpuharness", *args, "--registry", str(self.registry.root)],
                              capture_output=True, text=True, timeout=120, cwd=self.tmp_path)

    def assert_untouched(self, why: str) -> None:
        after = self.around()
        assert not self.marker.exists() and not (self.host.root / self.marker.name).exists(), why
        assert {p for p in after if p not in self.before} == set(), why
        assert after == self.before, why

    def close(self) -> None:
        self.health.close()


@pytest.fixture
def world(tmp_path):
    made: list[World] = []

    def make(*args, **kwargs) -> World:
        made.append(World(tmp_path, *args, **kwargs))
        return made[-1]

    yield make
    for w in made:
        w.close()


def test_install_sends_hostile_model_paths_and_urls_as_data(world, tmp_path):
    w = world(status="provisioning", model="hostile")
    source = tmp_path / "weights.bin"
    source.write_bytes(b"weights")
    sha = hashlib.sha256(b"weights").hexdigest()
    files = [{"path": f"h3/{value}x.bin", "url": source.as_uri(), "sha256": sha, "size": 7}
             for value in hostile(w.marker)]
    with w.registry.update("models.json") as doc:
        doc["models"].append({"name": "hostile", "files": files})
    w.start()
    done = w.cli("install", DEP, "--deadline", "60")
    assert done.returncode == 0, done.stderr
    w.assert_untouched(done.stderr)
    for item in files:  # each file is where its path says, under the workspace, named literally
        assert (w.host.workspace / "models" / item["path"]).read_bytes() == b"weights"


def test_install_refuses_a_model_path_or_url_that_leaves_the_workspace_before_any_exec(world, tmp_path):
    w = world(status="provisioning", model="hostile")
    source = tmp_path / "weights.bin"
    source.write_bytes(b"weights")
    sha = hashlib.sha256(b"weights").hexdigest()
    escape = "../" * 10 + str(tmp_path / "escaped.bin").lstrip("/")
    w.start()
    for path, url in ((escape, source.as_uri()), ("ok.bin", f"-K{tmp_path}/curlrc"),
                      ("ok.bin", f"file://{source}$(touch {w.marker})")):
        with w.registry.update("models.json") as doc:
            doc["models"] = [{"name": "hostile", "files": [{"path": path, "url": url, "sha256": sha, "size": 7}]}]
        execs = w.host.stats["ssh_execs"]
        done = w.cli("install", DEP, "--deadline", "60")
        assert done.returncode == 2, done.stderr
        assert not (tmp_path / "escaped.bin").exists()
        if path == escape:
            assert "climbs out" in done.stderr and w.host.stats["ssh_execs"] == execs  # refused before any exec
        w.assert_untouched(done.stderr)


def test_configure_writes_a_hostile_workflow_only_under_the_workspace(world):
    w = world(status="configuring", workflow="wf")
    values = hostile(w.marker)
    w.start()
    with w.registry.update("workflows.json") as doc:
        doc["workflows"].append({"id": "wf", "version": 1, "runtime": "comfyui", "graph": {"1": {
            "class_type": "SaveImage", "inputs": {"filename_prefix": values}}},
            "test_generation": {"inputs": {}, "timeout_s": 60}})
    done = w.cli("configure", DEP, "--deadline", "60")
    assert done.returncode == 0, done.stderr
    w.assert_untouched(done.stderr)
    written = json.loads((w.host.workspace / "workflows" / "wf.json").read_text())
    assert written["graph"]["1"]["inputs"]["filename_prefix"] == values
    for workflow_id in (*values, "../../../../escaped", ".."):
        with w.registry.update("workflows.json") as doc:
            doc["workflows"] = [dict(doc["workflows"][0], id=workflow_id)]
        w.registry.update_deployment(DEP, workflow=workflow_id, status="configuring")
        done = w.cli("configure", DEP, "--deadline", "60")
        w.assert_untouched(done.stderr)
        if "/" in workflow_id:  # an id is one file name under workflows/
            assert done.returncode == 2 and ("plain file name" in done.stderr or "climbs out" in done.stderr)
        else:
            assert done.returncode == 0, done.stderr
            assert (w.host.workspace / "workflows" / f"{workflow_id}.json").is_file()


def test_run_stores_an_openai_completion_with_hostile_inputs_as_data(world):
    w = world(HostSpec(runtime="openai", runtime_faults=RuntimeFaults(polls_before_done=0)), status="ready")
    inputs = {"prompt": "".join(hostile(w.marker)), "max_tokens": 4}
    w.start()
    done = w.cli("run", DEP, "--inputs", json.dumps(inputs), "--poll", "0.05")
    assert done.returncode == 0, done.stderr
    w.assert_untouched(done.stderr)
    [stored] = (w.host.workspace / "outputs").glob("*/completion.json")
    assert json.loads(stored.read_text())["request"]["prompt"] == inputs["prompt"]


def test_retrieve_reads_hostile_remote_paths_as_data_and_refuses_those_outside_the_workspace(world, tmp_path):
    w = world(status="ready")
    out = w.host.workspace / "output"
    out.mkdir(parents=True, exist_ok=True)
    names = [f"{value}.png" for value in hostile(w.marker) if "/" not in value]
    for name in names:
        (out / name).write_bytes(name.encode())
    (w.host.root / "secret.txt").write_text("outside the workspace")
    artifacts = [{"name": f"a{i}.png", "remote_path": str(out / name)} for i, name in enumerate(names)]
    artifacts.append({"name": "secret.txt", "remote_path": str(w.host.root / "secret.txt")})
    artifacts.append({"name": "climb.txt", "remote_path": f"{out}/../../secret.txt"})
    line = {"id": "J-000001", "deployment_id": DEP, "status": "completed", "ts": "2026-12-01T10:00:00Z",
            "artifacts": artifacts}
    w.registry.ledger_path.write_text(json.dumps(line) + "\n")
    to = w.host.workspace / "retrieved"  # inside the listed-out tree: only --to may change
    w.start()
    done = w.cli("retrieve", DEP, "--to", str(to))
    w.assert_untouched(done.stderr)
    assert done.returncode == 2 and "2 artifact(s) not synced" in done.stderr and "not under the workspace" in \
        done.stderr and "climbs out" in done.stderr
    assert sorted(p.name for p in (to / "J-000001").iterdir()) == sorted(a["name"] for a in artifacts[:-2])


def test_reap_looks_for_new_outputs_under_a_hostile_checkpoint_path_as_data(world):
    from gpuharness.operations.reap import output_progress
    from gpuharness.operations.seams import cli_context

    w = world(status="ready")
    w.start()
    for value in hostile(w.marker):
        w.registry.update_deployment(DEP, checkpoint_path=value)
        ctx = cli_context(w.registry)
        assert output_progress(ctx, ctx.registry.deployment(DEP), "2026-01-01T00:00:00Z") is None
    w.assert_untouched("reap")


def test_the_probe_sends_hostile_targets_as_data(tmp_path):
    marker = tmp_path / "INJECTED"
    with SimHost(HostSpec(), root=tmp_path / "host") as host:
        before = listing(tmp_path, skip=(host.workspace,))
        block = host.ssh_block()
        route = HostRoute(target="dep_p", host=block["host"], port=block["port"], user="root",
                          key_file=block["key_file"], known_hosts=block["known_hosts"])
        remote = open_remote(route)
        try:
            for value in hostile(marker):
                targets = probe.ProbeTargets(workspace=value, process_pattern=value, log_path=value,
                                             checkpoint_path=value, output_dir=value)
                result, facts = probe.run(remote, targets, deadline_s=60)
                assert facts.complete, result.stderr
        finally:
            remote.close()
        after = listing(tmp_path, skip=(host.workspace,))
    assert not marker.exists()
    assert after == before


@pytest.mark.parametrize("value", ["$(id)", "`id`", "a'b", 'a"b', "a\nb", "-rf", "", "a b\tc", "é\\x"])
def test_a_quoted_value_reaches_the_shell_exactly(tmp_path, value):
    script = ShellScript().let("v", value).code('printf "%s" "$v"').call("printf", "|%s", value)
    done = subprocess.run(["/bin/sh", "-c", script.text()], capture_output=True, text=True, cwd=tmp_path)
    assert done.stdout == f"{value}|{value}"
    assert subprocess.run(["/bin/sh", "-c", f"printf %s {quote(value)}"], capture_output=True, text=True).stdout \
        == value


def test_a_script_refuses_a_workspace_or_path_that_could_leave_it():
    for workspace in ("", "-rf", "a/../../b", "ws\n"):
        with pytest.raises(UserError):
            ShellScript(workspace=workspace)
    script = ShellScript(workspace="gh-workspace")
    with pytest.raises(UserError, match="climbs out"):
        script.under_workspace("outputs", "../../x", what="job id")
    with pytest.raises(UserError, match="not under the workspace"):
        script.within_workspace("/etc/passwd", what="remote_path")
    assert script.under_workspace("outputs", "J-1", "a.json", what="x") == "gh-workspace/outputs/J-1/a.json"


def test_a_probe_path_that_reads_as_an_option_is_read_as_a_path(tmp_path):
    """A log file named `-f` is tailed, not taken for tail's follow option (which would hold the probe)."""
    with SimHost(HostSpec(), root=tmp_path / "host") as host:
        (host.root / "-f").write_text("a line of the log named -f\n")
        block = host.ssh_block()
        route = HostRoute(target="dep_p", host=block["host"], port=block["port"], user="root",
                          key_file=block["key_file"], known_hosts=block["known_hosts"])
        remote = open_remote(route)
        try:
            result, facts = probe.run(remote, probe.ProbeTargets(workspace=block["workspace"], log_path="-f"),
                                      deadline_s=20)
        finally:
            remote.close()
    assert not result.timed_out and facts.complete
    assert facts.log_tail == ("a line of the log named -f",)
