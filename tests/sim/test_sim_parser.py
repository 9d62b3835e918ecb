"""The simulator refuses bad requests cleanly: a one-line 400 in the provider's shape, never a traceback or a
connection dropped without an answer; control routes refuse NaN, negative and out-of-range numbers."""

from __future__ import annotations

import json
import socket
from secrets import token_hex

import httpx
import pytest

from gpuharness.sim import Simulator

KEY = "sim-parser-key-" + token_hex(8)  # made per run


def raw_exchange(sim: Simulator, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are; read the whole answer (the server closes after a refused body)."""
    host, port = sim.base_url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as conn:
        conn.sendall(request)
        conn.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), {k.lower(): v for k, v in headers.items()}, body


def post_raw(path: str, content_length: str, body: bytes = b"") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {content_length}\r\n\r\n").encode() + body


@pytest.mark.parametrize("length", ["abc", "-5", "1e3", " "])
def test_a_content_length_that_is_not_a_non_negative_integer_is_a_400(sim: Simulator, length: str):
    status, headers, body = raw_exchange(sim, post_raw("/_sim/faults", length, b"{}"))
    assert status == 400 and headers["content-type"] == "application/json"
    reason = json.loads(body)["error"]
    assert "Content-Length must be a non-negative integer" in reason and "\n" not in reason


def test_a_body_shorter_than_its_content_length_is_a_400_not_a_hang(sim: Simulator):
    status, _, body = raw_exchange(sim, post_raw("/vast/api/v0/bundles/", "100", b'{"a": 1}'))
    assert status == 400 and json.loads(body) == {"success": False, "error": "invalid_args",
                                                  "msg": "body ended after 8 of 100 bytes"}


def test_a_body_over_the_limit_is_a_413(sim: Simulator):
    status, _, body = raw_exchange(sim, post_raw("/runpod/v2/pods", str(50 * 1024 * 1024)))
    assert status == 413 and "limit" in json.loads(body)["detail"]


def test_chunked_bodies_are_refused_with_411(sim: Simulator):
    request = b"POST /_sim/faults HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"
    status, _, body = raw_exchange(sim, request)
    assert status == 411 and "Content-Length" in json.loads(body)["error"]


@pytest.mark.parametrize(("path", "expected"), [
    ("/vast/api/v0/bundles/", {"success": False, "error": "invalid_args"}),
    ("/runpod/v2/pods", {"status": 400, "title": "Bad Request"}),
    ("/runpod/graphql", {}),
    ("/_sim/faults", {}),
])
def test_a_body_that_is_not_json_is_a_400_in_the_providers_shape(sim: Simulator, path: str, expected: dict):
    answer = httpx.post(sim.base_url + path, content=b"{not json", headers={"Authorization": f"Bearer {KEY}"})
    body = answer.json()
    text = json.dumps(body)
    assert answer.status_code == 400 and "not JSON" in text and "Traceback" not in text
    assert expected.items() <= body.items()
    # the server is still serving
    assert httpx.get(sim.base_url + "/_sim/stats").status_code == 200


def test_nan_and_infinity_are_not_json(sim: Simulator):
    answer = httpx.post(sim.base_url + "/_sim/faults", content=b'{"provider": "vast", "fault": "rate_limit", '
                                                                b'"retry_after": NaN}')
    assert answer.status_code == 400 and "NaN is not a JSON number" in answer.json()["error"]
    assert sim.faults.armed() == []


@pytest.mark.parametrize("fault", [
    {"retry_after": -1}, {"retry_after": float("inf")}, {"retry_after": 10**9}, {"retry_after": "2"},
    {"count": -2}, {"count": 0}, {"count": 1.5}, {"count": True},
    {"latency_ms": -1}, {"latency_ms": 0.5}, {"latency_ms": 10**8}, {"latency_ms": False},
])
def test_fault_numbers_out_of_range_are_refused_with_the_field_named(sim: Simulator, fault: dict):
    body = {"provider": "runpod", "fault": "latency" if "latency_ms" in fault else "rate_limit", **fault}
    text = json.dumps(body).replace("Infinity", "1e999")  # 1e999 parses as inf: the check, not the parser, refuses
    answer = httpx.post(sim.base_url + "/_sim/faults", content=text.encode())
    assert answer.status_code == 400 and f"'{next(iter(fault))}'" in answer.json()["error"]
    assert sim.faults.armed() == []


@pytest.mark.parametrize("delay", [-1, "1", None, 1e999, 10**6])
def test_ready_delay_must_be_a_finite_number_of_seconds(sim: Simulator, delay: object):
    text = json.dumps({"ready_delay_s": delay}).replace("Infinity", "1e999")
    answer = httpx.post(sim.base_url + "/_sim/config", content=text.encode())
    assert answer.status_code == 400 and "'ready_delay_s'" in answer.json()["error"]


@pytest.mark.parametrize("count", [True, 0, 1.0, 100_001])
def test_bulk_instance_count_must_be_an_integer_in_range(sim: Simulator, count: object):
    answer = httpx.post(sim.base_url + "/_sim/instances", json={"provider": "vast", "count": count})
    assert answer.status_code == 400 and "'count'" in answer.json()["error"]


def test_recorded_requests_keep_the_auth_scheme_never_the_key(sim: Simulator):
    httpx.get(sim.base_url + "/vast/api/v1/instances/", params={"limit": 3}, headers={"Authorization": f"Bearer {KEY}"})
    listed = httpx.get(sim.base_url + "/_sim/requests").json()["requests"]
    assert listed[-1]["query"] == {"limit": ["3"]} and listed[-1]["headers"]["authorization"] == "Bearer ***"
    httpx.get(sim.base_url + "/vast/api/v0/users/current", params={"api_key": KEY})
    listed = httpx.get(sim.base_url + "/_sim/requests").json()["requests"]
    assert listed[-1]["query"] == {"api_key": ["***"]}
    assert KEY not in json.dumps(listed)
    assert httpx.delete(sim.base_url + "/_sim/requests").json() == {"requests": []}
