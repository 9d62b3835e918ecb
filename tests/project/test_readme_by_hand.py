"""The README's "Try it by hand" block runs as written: each line, verbatim, in one bash in an empty directory,
against a real `gpuharness sim serve` on loopback (started by the block itself)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from checkout import ROOT

from gpuharness.core.deployment import DEFAULT_WORKSPACE
from gpuharness.core.ledger import Ledger
from gpuharness.core.registry import Registry

README = ROOT / "README.md"
MARKER = "<!-- try-it-by-hand -->"

#: What each line must print (stdout), by the command it starts with; every line must also exit 0.
EXPECTED = {
    "gpuharness init": r"created \d+ file",
    "gpuharness sim serve": r"^ready http://127\.0\.0\.1:\d+ \(pid \d+;",
    "gpuharness providers check": r"vast\s+vast\s+ok",
    "gpuharness offers": r"RTX 4090",
    "gpuharness provision": r"provisioned dep_\w+ \(\w[\w-]*\) on vast instance",
    "gpuharness install": r"installed dep_\w+",
    "gpuharness configure": r"configured dep_\w+; next: pytest checks/health --gpu-mode live --deployment dep_\w+",
    "gpuharness check health": r"passed",
    "gpuharness run": r"J-\d+ completed",
    "gpuharness retrieve": r"synced 1 artifact\(s\)",
    "gpuharness destroy": r"destroyed dep_\w+ \(terminate verified by listing: True\)",
    "gpuharness sim stop": r"stopped the simulator at http://127\.0\.0\.1:\d+",
}


def by_hand_block() -> list[str]:
    """The lines of the fenced block that follows the marker in README.md, exactly as written."""
    text = README.read_text(encoding="utf-8")
    assert MARKER in text, f"README.md lost its {MARKER} marker"
    after = text.split(MARKER, 1)[1].lstrip("\n")
    assert after.startswith("```bash\n"), "the marker must be followed by a ```bash block"
    body = after[len("```bash\n"):].split("\n```", 1)[0]
    return [line for line in body.splitlines() if line.strip()]


def script_for(lines: list[str], out: Path) -> str:
    """One bash that runs each line in the current shell (so `export` carries), keeping its output and status."""
    parts = []
    for n, line in enumerate(lines):
        # the closing brace on its own line: a trailing `# comment` in the README line cannot swallow it
        parts.append(f"{{\n{line}\n}} >{out}/{n}.out 2>{out}/{n}.err </dev/null; echo $? >{out}/{n}.rc")
    return "\n".join(parts) + "\n"


def _stop(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_readme_try_it_by_hand_block_runs_as_written(tmp_path: Path) -> None:
    lines = by_hand_block()
    assert len(lines) >= len(EXPECTED), lines
    work, out, tmp = tmp_path / "work", tmp_path / "out", tmp_path / "tmp"
    for d in (work, out, tmp):
        d.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUHARNESS_", "PYTEST_"))}
    env.update(PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}", TMPDIR=str(tmp))
    started = None
    try:
        subprocess.run(["bash", "-c", script_for(lines, out)], cwd=work, env=env, timeout=300, check=False)
        for n, line in enumerate(lines):
            stdout = (out / f"{n}.out").read_text()
            stderr = (out / f"{n}.err").read_text()
            if line.startswith("gpuharness sim serve"):
                found = re.search(r"\(pid (\d+);", stdout)
                started = int(found.group(1)) if found else None
            rc = (out / f"{n}.rc").read_text().strip()
            assert rc == "0", f"line {n + 1} `{line}` exited {rc}:\n{stdout}\n{stderr}"
            expected = next((v for k, v in EXPECTED.items() if line.startswith(k)), None)
            if expected is not None:
                assert re.search(expected, stdout, re.MULTILINE), f"`{line}` printed:\n{stdout}\n{stderr}"
        assert sorted(p.name for p in (work / "outputs").rglob("*.png")), "retrieve synced no image"
        # install, the job's outputs, retrieve and the disk check all used the one default workspace
        registry = Registry(work / ".pi" / "gpu")
        [deployment] = registry.deployments()
        assert deployment.ssh is not None and deployment.ssh.workspace is None
        checks = deployment.to_json()["health"]["checks"]
        assert checks["disk_has_room_for_model"] == checks["test_generation_succeeds"] == "passed"
        paths = [a["remote_path"] for job in Ledger(registry.ledger_path).current().values()
                 for a in job.get("artifacts") or []]
        assert paths and all(p.startswith(f"{DEFAULT_WORKSPACE}/output/") for p in paths), paths
        assert started is not None
        # `sim stop` stopped it: the process is gone and its hosts' key and known_hosts with it
        end = time.monotonic() + 10
        while time.monotonic() < end and _alive(started):
            time.sleep(0.1)
        assert not _alive(started)
        assert not list(tmp.glob("gh-sim-access-*")), "the simulator left its key files behind"
        assert not list(tmp.glob("gh-host-*")), "the simulator left host sandboxes behind"
    finally:
        if started is not None:
            _stop(started)


def _alive(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)  # not our child (the shell's grandchild): this only raises
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").exists() and " Z " not in Path(f"/proc/{pid}/stat").read_text()
