"""Transport safety: bounded retries for reads, one shot for mutations, Retry-After honoured, keys never echoed."""

from __future__ import annotations

import logging
import random
from datetime import UTC, datetime
from secrets import token_hex

import httpx
import pytest
import respx
from provider_time import FakeTime

from gpuharness.providers.base import ProviderError, UnknownOutcome
from gpuharness.providers.failures import classify
from gpuharness.providers.transport import ProviderHttp, RetryPolicy, parse_retry_after, retry_wait
from gpuharness.sim import Simulator

SECRET = "GPUHARNESS_TEST_SECRET-" + token_hex(8)  # made per run
BASE = "https://api.example.test"


def client(fake: FakeTime, base: str = BASE, **kwargs) -> ProviderHttp:
    return ProviderHttp("runpod", base, SECRET, credential_env="RUNPOD_API_KEY", sleep=fake.sleep,
                        monotonic=fake.monotonic, wall=fake.wall, rng=fake.rng(), **kwargs)


def test_retry_after_is_read_as_seconds_or_http_date():
    now = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("2", now) == 2.0
    assert parse_retry_after("Mon, 30 Nov 2026 12:00:07 GMT", now) == 7.0
    assert parse_retry_after("Mon, 30 Nov 2026 11:00:00 GMT", now) == 0.0  # in the past: no wait
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after(None, now) is None


def test_backoff_is_5_10_20_capped_plus_jitter_and_never_below_retry_after():
    policy = RetryPolicy()
    rng = random.Random(1)
    waits = [retry_wait(n, None, policy, rng) for n in (1, 2, 3, 4)]
    for wait, base in zip(waits, (5, 10, 20, 20), strict=True):
        assert base <= wait <= base + policy.jitter_s
    assert retry_wait(1, 42.0, policy, rng) == 42.0
    assert retry_wait(3, None, RetryPolicy(backoff_s=(100.0,), cap_s=60.0), rng) <= 61.0


def test_429_storm_with_retry_after_2_waits_at_least_2s_each_time_and_stops_at_3_attempts():
    fake = FakeTime()
    with Simulator() as sim:
        sim.inject(provider="runpod", fault="rate_limit", count=50, retry_after=2)
        http = client(fake, sim.url("runpod"))
        with pytest.raises(ProviderError) as caught:
            http.read("GET", "/v2/pods")
        requests = sim.stats()["requests"]["GET /runpod/v2/pods"]
    assert caught.value.kind == "rate_limited"
    assert "gave up after 3 attempts" in str(caught.value)
    assert requests == 3 and len(http.calls) == 3
    assert len(fake.sleeps) == 2 and all(wait >= 2.0 for wait in fake.sleeps)


def test_long_retry_after_wins_over_backoff():
    fake = FakeTime()
    with Simulator() as sim:
        sim.inject(provider="runpod", fault="rate_limit", count=1, retry_after=30)
        pods = client(fake, sim.url("runpod")).read("GET", "/v2/pods").json()
    assert pods == {"pods": []}
    assert fake.sleeps and fake.sleeps[0] >= 30.0


def test_vast_429_plain_text_without_retry_after_is_retried_with_backoff():
    fake = FakeTime()
    with Simulator() as sim:
        sim.inject(provider="vast", fault="rate_limit", count=2)
        http = ProviderHttp("vast", sim.url("vast"), SECRET, sleep=fake.sleep, monotonic=fake.monotonic,
                            wall=fake.wall, rng=fake.rng())
        body = http.read("GET", "/api/v1/instances/", params={"limit": 25}).json()
    assert body["instances"] == []
    assert [c.status for c in http.calls] == [429, 429, 200]
    assert 5.0 <= fake.sleeps[0] <= 6.0 and 10.0 <= fake.sleeps[1] <= 11.0


def test_retry_that_would_pass_the_phase_deadline_is_not_attempted():
    fake = FakeTime()
    with respx.mock(base_url=BASE) as mock:
        route = mock.get("/v2/pods").mock(return_value=httpx.Response(503, json={"error": "unavailable"}))
        http = client(fake, deadline_s=12.0)
        with pytest.raises(ProviderError, match="phase deadline") as caught:
            http.read("GET", "/v2/pods")
    assert caught.value.kind == "server"
    assert route.call_count == 2 and len(fake.sleeps) == 1


def test_capacity_answer_on_a_read_is_not_retried():
    fake = FakeTime()
    with respx.mock(base_url=BASE) as mock:
        route = mock.get("/v2/pods").mock(return_value=httpx.Response(
            500, json={"error": "create pod: There are no instances currently available", "status": 500}))
        with pytest.raises(ProviderError) as caught:
            client(fake).read("GET", "/v2/pods")
    assert caught.value.kind == "capacity" and route.call_count == 1 and fake.sleeps == []


def test_mutation_is_sent_once_and_a_5xx_is_an_unknown_outcome():
    fake = FakeTime()
    with respx.mock(base_url=BASE) as mock:
        route = mock.post("/v2/pods").mock(return_value=httpx.Response(502, text="Bad Gateway"))
        with pytest.raises(UnknownOutcome, match="reconcile"):
            client(fake).mutate("POST", "/v2/pods", json={"name": "gh-x"})
    assert route.call_count == 1 and fake.sleeps == []


def test_dropped_response_after_commit_is_an_unknown_outcome():
    fake = FakeTime()
    with Simulator() as sim:
        sim.inject(provider="runpod", fault="drop_after_commit")
        with pytest.raises(UnknownOutcome):
            client(fake, sim.url("runpod")).mutate(
                "POST", "/v2/pods", json={"name": "gh-x", "image": "i", "gpu": {"id": "NVIDIA GeForce RTX 4090"}})
        assert sim.stats()["instances"] == 1


def test_refused_connection_is_a_network_error_not_an_unknown_outcome():
    fake = FakeTime()
    with Simulator() as sim:
        base = sim.url("runpod")
    # the simulator is stopped: nothing listens, the request never left
    with pytest.raises(ProviderError) as caught:
        client(fake, base, timeout_s=2.0).mutate("POST", "/v2/pods", json={})
    assert caught.value.kind == "network" and not isinstance(caught.value, UnknownOutcome)


@pytest.mark.parametrize(("status", "body", "kind"), [
    (500, '{"error":"create pod: There are no instances currently available","status":500}', "capacity"),
    (500, '{"error":"create pod: Your account balance is too low to rent a pod. Please add funds to your '
          'account.","status":500}', "balance"),
    (500, '{"error":"create pod: This machine does not have the resources to deploy your pod."}', "capacity"),
    (200, '{"errors":[{"message":"There are no longer any instances available with the requested specifications.",'
          '"extensions":{"code":"SUPPLY_CONSTRAINT"}}],"data":{"podFindAndDeployOnDemand":null}}', "capacity"),
    (404, '{"success":false,"error":"no_such_ask","msg":"error 404/3603: no_such_ask Instance type by id 1 is not '
          'available."}', "capacity"),
    (402, "", "balance"),
    (401, '{"success":false,"error":"auth_error","msg":"Invalid user key"}', "auth"),
    (403, '{"title":"Forbidden","status":403,"detail":"key lacks scope"}', "auth"),
    (429, "API requests too frequent endpoint threshold=2.0", "rate_limited"),
    (404, '{"error":"not_found","msg":"Instance not found"}', "not_found"),
    (400, '{"success":false,"error":"invalid_args","msg":"bad disk"}', "invalid"),
    (500, '{"error":"Something went wrong."}', "server"),
])
def test_errors_are_classified_by_status_and_text(status, body, kind):
    assert classify("p", status, body).kind == kind


def test_auth_error_names_the_variable_never_the_key(caplog):
    fake = FakeTime()
    caplog.set_level(logging.DEBUG)
    with respx.mock(base_url=BASE) as mock:
        # a hostile server echoing the Authorization header back in its error body
        mock.get("/v2/pods").mock(side_effect=lambda request: httpx.Response(
            401, json={"error": f"bad key {request.headers['Authorization']}"}))
        with pytest.raises(ProviderError) as caught:
            client(fake).read("GET", "/v2/pods")
    message = str(caught.value)
    assert caught.value.kind == "auth" and "$RUNPOD_API_KEY" in message
    assert SECRET not in message and "***" in message
    assert SECRET not in caplog.text


def test_read_timeout_is_retried_as_a_network_error():
    fake = FakeTime()
    with Simulator() as sim:
        sim.inject(provider="runpod", fault="latency", count=1, latency_ms=1500)
        http = client(fake, sim.url("runpod"), timeout_s=0.2)
        assert http.read("GET", "/v2/pods").json() == {"pods": []}
    assert [c.error for c in http.calls] == ["ReadTimeout", None] and len(fake.sleeps) == 1
