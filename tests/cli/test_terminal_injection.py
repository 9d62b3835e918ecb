"""Terminal injection: names and labels a provider reports, error bodies a provider answers, and log lines given to
`diagnose` are shown with their control characters escaped (ESC, BEL, OSC, CSI, carriage return, bidi overrides),
by the command line's one printing seam."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from gpuharness.cli import main
from gpuharness.core.registry import Registry
from gpuharness.core.terminal import escape

#: set the window title, clear the screen, ring the bell, C1 CSI, hide a line with a carriage return, flip text
HOSTILE = "\x1b]0;pwned\x07\x1b[2J\x07\x9b31m\rfake\u202eevil"
RAW = ("\x1b", "\x07", "\x9b", "\r", "\u202e")


def assert_escaped(text: str, shown: str = "\\x1b]0;pwned\\x07\\x1b[2J") -> None:
    assert not any(c in text for c in RAW), repr(text)
    assert shown in text, repr(text)


def test_escape_shows_control_characters_and_keeps_text():
    assert escape("plain, ünïcode and\ttabs\nlines") == "plain, ünïcode and\ttabs\nlines"
    assert escape(HOSTILE) == "\\x1b]0;pwned\\x07\\x1b[2J\\x07\\x9b31m\\rfake\\u202eevil"
    assert escape("lone \ud800 surrogate") == "lone \\ud800 surrogate"


@pytest.fixture
def simulated(seeded_simulator):
    return seeded_simulator


def test_status_refresh_escapes_an_orphan_name_the_provider_reports(simulated, capsys):
    sim, registry = simulated
    httpx.post(sim.base_url + "/_sim/instances", json={"provider": "vast", "count": 1,
                                                          "name_prefix": f"gh-leak-{HOSTILE}"})
    assert main(["status", "--refresh", "--registry", str(registry.root)]) == 1
    out = capsys.readouterr().out
    assert "ORPHAN" in out
    assert_escaped(out)


def test_status_escapes_provider_supplied_values_kept_in_the_registry(simulated, capsys):
    _, registry = simulated
    with registry.update("deployments.json") as document:
        document["deployments"][0]["instance_id"] = HOSTILE
    assert main(["status", "--registry", str(registry.root)]) == 0
    assert_escaped(capsys.readouterr().out)


class _Hostile(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        return None

    def do_GET(self) -> None:
        body = json.dumps({"error": "unauthorized", "msg": f"bad key {HOSTILE}"}).encode()
        self.send_response(401)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_providers_check_escapes_a_hostile_error_body(tmp_path, monkeypatch, capsys):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        registry = Registry(tmp_path / "registry")
        registry.init()
        with registry.update("providers.json") as document:
            document["providers"] = [{"name": "vast", "kind": "vast", "credential_env": "GH_HOSTILE_KEY",
                                      "api_base": f"http://127.0.0.1:{server.server_address[1]}"}]
        monkeypatch.setenv("GH_HOSTILE_KEY", "k" * 32)
        assert main(["providers", "check", "--registry", str(registry.root)]) == 1
    finally:
        server.shutdown()
    out = capsys.readouterr().out
    assert "REFUSED" in out
    assert_escaped(out)


def test_diagnose_escapes_the_log_lines_it_quotes(tmp_path, capsys):
    log = tmp_path / "comfy.log"
    log.write_text(f"Starting server\n{HOSTILE} torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
                   "\nGot an OOM, unloading all loaded models.\n")
    main(["diagnose", str(log)])
    captured = capsys.readouterr()
    assert "cuda_oom" in captured.out
    assert_escaped(captured.out + captured.err, "fake\\u202eevil torch.OutOfMemoryError")  # \r ends a line


def test_an_error_line_escapes_the_value_it_quotes(tmp_path, capsys):
    registry = Registry(tmp_path / "registry")
    registry.init()
    (registry.root / "deployments.json").write_text(f'{{"schema_version": 1, "deployments": [{{"id": 7, "x": '
                                                    f'{json.dumps(HOSTILE)}}}]}}')
    assert main(["destroy", HOSTILE, "--registry", str(registry.root)]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith("gpuharness: error:") and not any(c in captured.err for c in RAW)


def test_the_command_line_prints_only_through_its_escaping_seam():
    """No print() in cli/ or operations/ outside core.terminal: every printed line passes escape()."""
    import ast
    from pathlib import Path

    import gpuharness

    root = Path(gpuharness.__file__).parent
    found = []
    for package in ("cli", "operations", "demo"):
        for path in (root / package).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                    found.append(f"{path.name}:{node.lineno}")
    assert found == []
