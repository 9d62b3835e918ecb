"""Cassettes: offline replay in mode none, body matching, metadata, and scrubbing of secrets."""

from __future__ import annotations

import gzip
import json
import secrets
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
import yaml

from gpuharness.core.errors import UserError
from gpuharness.providers import cassette


class _Echo(BaseHTTPRequestHandler):
    """A loopback provider stand-in that echoes what it got (including the key), gzip-compressed."""

    def log_message(self, *args: object) -> None:
        pass

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length).decode() if length else ""
        payload = {"path": self.path, "auth": self.headers.get("authorization"), "got": body,
                   "instance_api_key": "d15a" + self.server.secret[-8:],  # type: ignore[attr-defined]
                   "echo_url": f"http://x{self.path}"}
        raw = gzip.compress(json.dumps(payload).encode())
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-encoding", "gzip")
        self.send_header("set-cookie", f"session={self.server.secret}")  # type: ignore[attr-defined]
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    do_GET = _answer
    do_POST = _answer


@pytest.fixture
def planted(monkeypatch: pytest.MonkeyPatch) -> str:
    value = "sk-test-" + secrets.token_hex(16)
    monkeypatch.setenv(cassette.TEST_SECRET_ENV, value)
    return value


@pytest.fixture
def server(planted: str) -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    httpd.secret = planted  # type: ignore[attr-defined]
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _calls(base: str, key: str) -> list[dict[str, object]]:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}) as client:
        answers = [client.get("/vast/api/v1/instances/", params={"limit": 25, "api_key": key}).json(),
                   client.post("/runpod/v2/pods", json={"name": "gh-a", "env": {"TOKEN": key}}).json(),
                   client.post("/runpod/v2/pods", json={"name": "gh-b"}).json()]
    return answers


def test_record_scrubs_authorization_api_key_and_body_secrets_even_when_gzipped(server, planted, tmp_path):
    path = tmp_path / "c.yaml"
    with cassette.use(path, cassette.Mode.RECORD, secrets=cassette.secret_values()):
        _calls(server, planted)
    text = path.read_text()
    assert planted not in text
    assert planted[-8:] not in text
    assert "!!binary" not in text
    assert "REDACTED" in text


def test_record_metadata_says_recorded_against_the_simulator(server, planted, tmp_path):
    path = tmp_path / "c.yaml"
    with cassette.use(path, cassette.Mode.RECORD, metadata={"api_bases": {"runpod": server + "/runpod"}}):
        _calls(server, planted)
    metadata = cassette.read_metadata(path)
    assert metadata["recorded_against"] == cassette.SIMULATOR
    assert "simulator" in metadata["note"]
    assert metadata["api_bases"]["runpod"].endswith("/runpod")


def test_offline_replays_without_the_server_and_without_credentials(server, planted, tmp_path):
    path = tmp_path / "c.yaml"
    with cassette.use(path, cassette.Mode.RECORD, secrets=[planted]):
        live = _calls(server, planted)
    # another host and port, no key: replay matches on method, path, query and body only
    with cassette.use(path, cassette.Mode.OFFLINE):
        replayed = _calls("http://127.0.0.1:9", "")
    assert [str(r["path"]).split("?")[0] for r in replayed] == [str(r["path"]).split("?")[0] for r in live]
    assert planted not in json.dumps(replayed)
    assert replayed[1]["got"] != replayed[2]["got"]


def test_offline_body_mismatch_fails_naming_the_call(server, planted, tmp_path):
    path = tmp_path / "c.yaml"
    with cassette.use(path, cassette.Mode.RECORD):
        _calls(server, planted)
    with pytest.raises(UserError) as caught, cassette.use(path, cassette.Mode.OFFLINE), \
            httpx.Client(base_url="http://127.0.0.1:9") as client:
        client.post("/runpod/v2/pods", json={"name": "gh-other"})
    line = caught.value.line()
    assert "no recorded interaction for POST /runpod/v2/pods" in line
    assert "body differs" in line
    assert str(path) in line


def test_offline_missing_cassette_is_one_line_error(tmp_path):
    with pytest.raises(UserError, match="cassette not found"), \
            cassette.use(tmp_path / "none.yaml", cassette.Mode.OFFLINE):
        pass


def test_offline_broken_cassette_is_one_line_error_with_place(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("interactions: [\n  - {request: \n")
    with pytest.raises(UserError) as caught, cassette.use(path, cassette.Mode.OFFLINE):
        pass
    assert "not a readable cassette" in caught.value.line()
    assert caught.value.place is not None


def test_unknown_mode_is_refused():
    with pytest.raises(UserError, match="unknown gpu mode"):
        cassette.Mode.parse("replay")


def test_scrubber_replaces_secret_fields_in_nested_json():
    scrubber = cassette.Scrubber(["abcdef123456"])
    out = scrubber.body(b'{"a":{"password":"hunter22","x":["key abcdef123456"]},"jupyter_token":"t0k"}')
    assert out is not None and isinstance(out, bytes)
    data = yaml.safe_load(out.decode())
    assert data == {"a": {"password": "REDACTED", "x": ["key REDACTED"]}, "jupyter_token": "REDACTED"}
