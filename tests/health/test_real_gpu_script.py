"""bench/real_gpu.sh (issue 21 item 6) against the simulator's stand-in for a GPU box: a simulated H200 host's fake
nvidia-smi on PATH, its runtime's interpreter (torch: the stand-in) and its running ComfyUI service, reached over the
`local` transport. The script registers the machine, runs the health suite in record mode and writes the cassette,
which then replays offline with the same verdicts; bad arguments exit 2 and overwrite nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile

import pytest
from checkout import ROOT

from gpuharness.sim.host import HostSpec, SimHost

SCRIPT = ROOT / "bench" / "real_gpu.sh"


def real_gpu(host: SimHost, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{host.bin}:{os.environ['PATH']}", "GH_PYTHON": sys.executable}
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=300,
                          check=False)


@pytest.fixture(scope="module")
def h200_box(tmp_path_factory: pytest.TempPathFactory):
    with SimHost(HostSpec(gpu="NVIDIA H200"), root=tmp_path_factory.mktemp("box-host")) as host:
        yield host


def test_the_script_records_a_cassette_that_replays_offline_with_every_check_passing(h200_box, tmp_path):
    out = tmp_path / "gpu-box"
    done = real_gpu(h200_box, "--python", str(h200_box.service_python), "--port", str(h200_box.service_port),
                    "--log", str(h200_box.log_path), "--endpoint", str(h200_box.endpoint), "--out", str(out))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "15 passed, 1 skipped" in done.stdout and f"send back: {out}/gpuharness-recording.tar.gz" in done.stdout
    deployment = json.loads((out / "registry" / "deployments.json").read_text())["deployments"][0]
    assert (deployment["id"], deployment["gpu"], deployment["gpu_count"], deployment["ssh"]["transport"]) == (
        "dep_local_gpu", "NVIDIA H200", 1, "local")
    assert deployment["status"] == "ready"
    cassette = json.loads((out / "cassettes" / "ssh" / "dep_local_gpu.json").read_text())
    assert '"timing": {"d2h_gbps": "cuda-events median of' in cassette["measurement"]["stdout"]
    with tarfile.open(out / "gpuharness-recording.tar.gz") as bundle:
        assert "cassettes/ssh/dep_local_gpu.json" in bundle.getnames()

    registry = tmp_path / "replay"
    shutil.copytree(out / "registry", registry)
    with (registry / "deployments.json").open("r+") as handle:
        document = json.load(handle)
        document["deployments"][0]["status"] = "health-checking"
        handle.seek(0), handle.truncate(), json.dump(document, handle)
    replay = subprocess.run([sys.executable, "-m", "gpuharness", "check", "health", "--gpu-mode", "offline",
                             "--registry", str(registry), "--cassettes", str(out / "cassettes"), "-q"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path, check=False)
    assert replay.returncode == 0 and "15 passed, 1 skipped" in replay.stdout, replay.stdout[-3000:]


@pytest.mark.parametrize(("args", "says"), [
    ((), "--python names the runtime's interpreter"),
    (("--python", "/nonexistent/python"), "--python /nonexistent/python is not an executable interpreter"),
    (("--python", sys.executable, "--port", "http"), "--port http is not a port number"),
    (("--python", sys.executable, "--bogus", "1"), "unknown argument --bogus"),
    (("--python", sys.executable, "--port"), "--port needs a value"),
])
def test_bad_arguments_exit_2_with_one_line(h200_box, tmp_path, args, says):
    done = real_gpu(h200_box, *args, "--out", str(tmp_path / "new")) if args[-1:] != ("--port",) else \
        real_gpu(h200_box, *args)
    assert done.returncode == 2 and says in done.stderr and len(done.stderr.splitlines()) == 1, done.stderr
    assert not (tmp_path / "new").exists()


def test_an_existing_folder_is_never_overwritten(h200_box, tmp_path):
    (tmp_path / "keep.txt").write_text("mine")
    done = real_gpu(h200_box, "--python", sys.executable, "--out", str(tmp_path))
    assert done.returncode == 2 and "exists: name a new folder with --out" in done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep.txt"]
