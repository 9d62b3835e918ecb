"""Live byte progress: install's downloads (run on the host inside its one batched exec) and retrieve's SFTP
transfers show a bar that is redrawn in place on a terminal, and nothing but the result with --json or a pipe.
The terminal is a real pseudo-terminal; the host is a simulated one over real SSH; the download is real HTTP."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from lifecycle_fakes import provision_comfyui

from gpuharness.core.clock import now_ts
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import transition
from gpuharness.demo.simulated_estate import MODEL, SimulatedEstate
from gpuharness.operations.retrieve import retrieve
from gpuharness.remote.connect import open_remote
from gpuharness.remote.local import LocalRemote
from gpuharness.remote.route import HostRoute
from gpuharness.sim.host import SimHost

DEP = "dep_bytes_01"
CHUNK = 64 * 1024
#: the rich DownloadColumn's "done/total unit" (e.g. 0.3/1.0 MB)
RENDERED = re.compile(r"(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?) (?:bytes|kB|MB)")
#: cursor movement and line erasing: a redraw in place, not a new line per update
IN_PLACE = ("\x1b[2K", "\x1b[1A", "\x1b[?25l")


class Recorder:
    """A Transfers that keeps every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int | None]] = []

    def begin(self, label: str, total: int | None, done: int = 0) -> None:
        self.calls.append(("begin", label, total))

    def advance(self, label: str, done: int) -> None:
        self.calls.append(("advance", label, done))

    def end(self, label: str) -> None:
        self.calls.append(("end", label, None))

    def close(self) -> None:
        self.calls.append(("close", "", None))

    def advances(self, label: str) -> list[int]:
        return [int(n or 0) for kind, name, n in self.calls if kind == "advance" and name == label]


# --- the transport delivers progress while it runs


@pytest.mark.parametrize("transport", ["ssh", "local"])
def test_exec_hands_each_stdout_line_over_while_the_script_still_runs(tmp_path, transport):
    # the script waits for a file that only the line callback creates: it can finish only if the first line
    # arrives before the exec is over
    with SimHost(root=tmp_path / "host") as host:
        go = (host.root if transport == "ssh" else tmp_path) / "go"
        script = f"echo first; while [ ! -f {go} ]; do sleep 0.05; done; echo second\n"
        remote = (open_remote(HostRoute(target="t", host=host.ssh_host, port=host.ssh_port, user="root",
                                        key_file=str(host.client_key_path), known_hosts=str(host.known_hosts_path)))
                  if transport == "ssh" else LocalRemote("t"))
        seen: list[str] = []

        def on_line(line: str) -> None:
            seen.append(line)
            go.touch()

        try:
            result = remote.exec(script, deadline_s=20, on_line=on_line)
        finally:
            remote.close()
    assert (result.timed_out, result.exit_status) == (False, 0)
    assert seen == ["first", "second"] and result.stdout == "first\nsecond\n"


def test_sftp_get_reports_bytes_chunk_by_chunk(tmp_path):
    payload = os.urandom(1024 * 1024 + 17)
    with SimHost(root=tmp_path / "host") as host:
        (host.root / "big.bin").write_bytes(payload)
        remote = open_remote(HostRoute(target="t", host=host.ssh_host, port=host.ssh_port, user="root",
                                       key_file=str(host.client_key_path), known_hosts=str(host.known_hosts_path)))
        seen: list[int] = []
        try:
            with (tmp_path / "big.bin").open("wb") as sink:
                moved = remote.get_file("big.bin", sink, progress=seen.append)
        finally:
            remote.close()
    assert moved == len(payload) == seen[-1]
    assert len(seen) > 8 and seen == sorted(seen)


# --- a real estate: a slow HTTP download for install, a large artifact for retrieve


@pytest.fixture
def slow_model() -> Iterator[tuple[str, bytes]]:
    """An HTTP server on loopback that sends a 1 MiB file in 64 KiB chunks, 0.1 s apart (at least 1.5 s)."""
    payload = os.urandom(16 * CHUNK)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            for start in range(0, len(payload), CHUNK):
                self.wfile.write(payload[start:start + CHUNK])
                self.wfile.flush()
                time.sleep(0.1)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/weights.bin", payload
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def lab(tmp_path) -> Iterator[SimulatedEstate]:
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        provision_comfyui(lab, DEP)
        yield lab


def _serve_model(lab: SimulatedEstate, url: str, payload: bytes, name: str) -> None:
    """models.json: the deployment's model is one file at url, under a new path (so the host has no copy)."""
    with lab.registry.update("models.json") as document:
        for model in document["models"]:
            if model["name"] == MODEL:
                model["files"] = [{"path": f"checkpoints/{name}", "url": url, "size": len(payload),
                                   "sha256": hashlib.sha256(payload).hexdigest()}]
    if lab.registry.deployment(DEP).status != "provisioning":
        transition(lab.registry, DEP, "error", error="install again (test)")


def _add_artifact(lab: SimulatedEstate, job: str, size: int) -> None:
    """A completed job whose artifact (size bytes) waits on the host."""
    data = os.urandom(size)
    # recorded as the executor records it: under the deployment's workspace (absolute on a simulated host)
    path = Path(lab.registry.deployment(DEP).workspace) / "output" / f"{job}.bin"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    ledger = Ledger(lab.registry.ledger_path)
    base = {"id": job, "deployment_id": DEP, "provider": "vast", "started_at": now_ts()}
    ledger.append({**base, "status": "running"})
    ledger.append({**base, "status": "completed", "completed_at": now_ts(), "duration_s": 1.0, "cost_usd": 0.0001,
                   "artifacts": [{"name": f"{job}.bin", "remote_path": str(path), "size": size,
                                  "sha256": hashlib.sha256(data).hexdigest()}]})


def in_terminal(lab: SimulatedEstate, *args: str, timeout: float = 120) -> tuple[int, str]:
    """Run `gpuharness ARGS` with a pseudo-terminal as stdin, stdout and stderr (100x30, output post-processing
    off, so every \\r seen is the program's); return its exit status and everything it wrote."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    attrs = termios.tcgetattr(slave)
    attrs[1] &= ~termios.OPOST
    termios.tcsetattr(slave, termios.TCSANOW, attrs)
    env = {**lab.env, "TERM": "xterm-256color", "COLUMNS": "100"}
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "gpuharness", *args], cwd=lab.root, env=env, stdin=slave,
                            stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    chunks: list[bytes] = []
    end = time.monotonic() + timeout
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # EIO: every writer closed the terminal
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        code = proc.wait(timeout=max(1.0, end - time.monotonic()))
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def _assert_quiet(*streams: str) -> None:
    for text in streams:
        assert "\x1b[" not in text and "\r" not in text, repr(text[-300:])
        assert not RENDERED.search(text), "a progress bar was printed"


def _assert_bar_redrawn_in_place(out: str, label: str, at_least: int) -> None:
    assert label in out
    assert any(code in out for code in IN_PLACE) or "\r" in out, repr(out[:400])
    values = {m.group(0) for m in RENDERED.finditer(out)}
    assert len(values) >= at_least, values
    assert out.count(label) >= at_least  # the same bar drawn again and again: one line on the screen


def test_install_download_shows_a_live_byte_bar_on_a_terminal_only(lab, slow_model):
    url, payload = slow_model
    registry = ["--registry", str(lab.registry.root)]

    _serve_model(lab, url, payload, "tty.bin")
    code, out = in_terminal(lab, "install", DEP, *registry)
    assert code == 0, out
    _assert_bar_redrawn_in_place(out, "checkpoints/tty.bin", at_least=3)
    assert "1/1 verified checkpoints/tty.bin" in out and f"installed {DEP}" in out

    _serve_model(lab, url, payload, "json.bin")
    code, out = in_terminal(lab, "install", DEP, "--json", *registry)
    assert code == 0, out
    _assert_quiet(out)
    assert json.loads(out[out.index("{"):])["deployment"]["id"] == DEP

    _serve_model(lab, url, payload, "pipe.bin")
    piped = lab.cli("install", DEP, *registry)
    assert piped.returncode == 0, piped.stderr
    _assert_quiet(piped.stdout, piped.stderr)
    assert piped.stdout.splitlines() == [piped.stdout.strip()] and piped.stdout.startswith(f"installed {DEP}")


def test_install_reports_each_download_byte_by_byte_through_the_transfers(lab, slow_model):
    url, payload = slow_model
    _serve_model(lab, url, payload, "weights.bin")
    recorder = Recorder()
    lab.ctx.transfers = recorder
    from gpuharness.operations.install import install
    install(lab.ctx, DEP)
    label = "checkpoints/weights.bin"
    assert recorder.calls[0] == ("begin", label, len(payload))
    seen = recorder.advances(label)
    assert seen == sorted(seen) and seen[-1] == len(payload)
    assert len({n for n in seen if 0 < n < len(payload)}) >= 2  # bytes moved while the download ran
    assert recorder.calls[-1] == ("end", label, None)


def test_retrieve_shows_a_live_byte_bar_on_a_terminal_only(lab):
    registry = ["--registry", str(lab.registry.root)]
    _add_artifact(lab, "J-000001", 3 * 1024 * 1024)
    code, out = in_terminal(lab, "retrieve", DEP, "--to", "tty", *registry)
    assert code == 0, out
    _assert_bar_redrawn_in_place(out, "J-000001/J-000001.bin", at_least=2)
    assert "synced 1 artifact(s)" in out

    _add_artifact(lab, "J-000002", 3 * 1024 * 1024)
    code, out = in_terminal(lab, "retrieve", DEP, "--to", "json", "--json", *registry)
    assert code == 0, out
    _assert_quiet(out)
    assert json.loads(out[out.index("{"):])["bytes"] == 3 * 1024 * 1024

    _add_artifact(lab, "J-000003", 3 * 1024 * 1024)
    piped = lab.cli("retrieve", DEP, "--to", "pipe", *registry)
    assert piped.returncode == 0, piped.stderr
    _assert_quiet(piped.stdout, piped.stderr)
    assert piped.stdout == "synced 1 artifact(s), 3,145,728 bytes, into pipe\n"


def test_retrieve_reports_bytes_as_they_arrive_through_the_transfers(lab):
    _add_artifact(lab, "J-000001", 1024 * 1024)
    recorder = Recorder()
    lab.ctx.transfers = recorder
    retrieve(lab.ctx, DEP, lab.root / "out")
    label = "J-000001/J-000001.bin"
    assert recorder.calls[0] == ("begin", label, 1024 * 1024)
    seen = recorder.advances(label)
    assert len(seen) >= 8 and seen == sorted(seen) and seen[-1] == 1024 * 1024
    assert recorder.calls[-1] == ("end", label, None)
    assert Path(lab.root / "out" / "J-000001" / "J-000001.bin").stat().st_size == 1024 * 1024
