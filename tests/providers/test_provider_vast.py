"""Vast.ai adapter, unit-tested with respx on the wire shapes of the vendor's spec
(https://github.com/vast-ai/docs/tree/c6246226/api-reference/openapi/yaml)."""

from __future__ import annotations

import json
from secrets import token_hex

import httpx
import pytest
import respx
from provider_time import FakeTime

from gpuharness.providers.base import LaunchSpec, ProviderError
from gpuharness.providers.transport import ProviderHttp
from gpuharness.providers.vast import VastAi, docker_options

BASE = "https://console.vast.ai"
KEY = token_hex(32)  # Vast's 64 hex digits, made per run

COMPACT = {"id": 12345678, "actual_status": "loading", "intended_status": "running", "cur_state": "running",
           "next_state": "running", "label": "gh-dep-v1", "status_msg": "Pulling image ...", "gpu_name": "RTX 4090",
           "num_gpus": 1, "dph_total": 0.4123, "ssh_host": "ssh5.vast.ai", "ssh_port": 31234,
           "public_ipaddr": "203.0.113.42", "ports": {"22/tcp": [{"HostIp": "0.0.0.0", "HostPort": "40122"}]},
           "start_date": 1761008618.22, "machine_id": 178}


def adapter(fake: FakeTime | None = None) -> tuple[VastAi, FakeTime]:
    fake = fake or FakeTime()
    http = ProviderHttp("vast", BASE, KEY, credential_env="VAST_API_KEY", sleep=fake.sleep,
                        monotonic=fake.monotonic, wall=fake.wall, rng=fake.rng())
    return VastAi("vast", http), fake


@respx.mock(base_url=BASE)
def test_show_with_instances_null_means_gone(respx_mock):
    respx_mock.get("/api/v0/instances/999/").respond(200, json={"instances": None})
    assert adapter()[0].get_instance("999") is None


@respx.mock(base_url=BASE)
def test_show_reads_the_singular_instances_object(respx_mock):
    respx_mock.get("/api/v0/instances/12345678/").respond(200, json={"instances": COMPACT})
    found = adapter()[0].get_instance("12345678")
    assert found is not None
    assert (found.status, found.raw_status, found.cost_hr) == ("pending", "loading", 0.4123)
    assert found.idempotency_key == "gh-dep-v1"
    assert (found.ssh.host, found.ssh.port) == ("203.0.113.42", 40122)  # direct port wins over the proxy
    assert found.created_at is not None and found.created_at.startswith("2025-10-21T")


@respx.mock(base_url=BASE)
def test_null_actual_status_is_pending_and_proxy_ssh_is_used_without_ports(respx_mock):
    row = {**COMPACT, "actual_status": None, "ports": {}, "public_ipaddr": None}
    respx_mock.get("/api/v0/instances/12345678/").respond(200, json={"instances": row})
    found = adapter()[0].get_instance("12345678")
    assert found.status == "pending" and found.raw_status is None
    assert (found.ssh.host, found.ssh.port) == ("ssh5.vast.ai", 31234)


@respx.mock(base_url=BASE)
def test_list_follows_next_token_through_every_page(respx_mock):
    pages = [
        {"success": True, "instances_found": 2, "total_instances": 3, "next_token": "eyJ2IjoxfQ==",
         "instances": [{**COMPACT, "id": 1}, {**COMPACT, "id": 2}]},
        {"success": True, "instances_found": 1, "total_instances": 3, "next_token": None,
         "instances": [{**COMPACT, "id": 3, "actual_status": "running"}]},
    ]
    route = respx_mock.get("/api/v1/instances/").mock(side_effect=[httpx.Response(200, json=p) for p in pages])
    found = adapter()[0].list_instances()
    assert [i.id for i in found] == ["1", "2", "3"] and found[2].status == "running"
    assert route.calls[0].request.url.params["limit"] == "25"
    assert route.calls[1].request.url.params["after_token"] == "eyJ2IjoxfQ=="


@respx.mock(base_url=BASE)
def test_list_with_instances_null_is_empty(respx_mock):
    respx_mock.get("/api/v1/instances/").respond(200, json={"success": True, "instances": None})
    assert adapter()[0].list_instances() == []


@respx.mock(base_url=BASE)
def test_429_plain_text_without_retry_after_is_retried_with_backoff(respx_mock):
    respx_mock.get("/api/v1/instances/").mock(side_effect=[
        httpx.Response(429, text="API requests too frequent endpoint threshold=2.0"),
        httpx.Response(200, json={"success": True, "instances": [], "next_token": None})])
    vast, fake = adapter()
    assert vast.list_instances() == []
    assert len(fake.sleeps) == 1 and 5.0 <= fake.sleeps[0] <= 6.0


@respx.mock(base_url=BASE)
def test_launch_picks_the_cheapest_offer_and_carries_the_key_in_the_label(respx_mock):
    search = respx_mock.post("/api/v0/bundles/").respond(200, json={"offers": [
        {"id": 2002, "gpu_name": "RTX 4090", "num_gpus": 1, "dph_total": 0.52, "gpu_ram": 24564},
        {"id": 2001, "gpu_name": "RTX 4090", "num_gpus": 1, "dph_total": 0.41, "gpu_ram": 24564}]})
    create = respx_mock.put("/api/v0/asks/2001/").respond(200, json={"success": True, "new_contract": 7835610,
                                                                     "instance_api_key": "d15a" * 16})
    spec = LaunchSpec(gpu="NVIDIA GeForce RTX 4090", image="vastai/comfy:latest", idempotency_key="gh-dep-v1",
                      ports=("22/tcp", "8188/http"), env={"MODE": "test"})
    instance = adapter()[0].launch(spec)
    query = json.loads(search.calls.last.request.content)
    assert query["gpu_name"] == {"eq": "RTX 4090"} and query["order"] == [["dph_total", "asc"]]
    body = json.loads(create.calls.last.request.content)
    assert body["label"] == "gh-dep-v1" and body["image"] == "vastai/comfy:latest"
    assert body["env"] == {"MODE": "test", "-p 8188:8188": "1"} and body["client_id"] == "me"
    assert instance.id == "7835610" and instance.cost_hr == 0.41 and instance.idempotency_key == "gh-dep-v1"
    assert "d15a" not in repr(instance)


@respx.mock(base_url=BASE)
def test_no_such_ask_on_create_is_a_capacity_error(respx_mock):
    respx_mock.put("/api/v0/asks/1234567/").respond(410, json={
        "error": "no_such_ask", "msg": "error 410/3907: no_such_ask Instance type 1234567 is no longer available."})
    with pytest.raises(ProviderError) as caught:
        adapter()[0].launch(LaunchSpec(gpu="RTX 4090", image="i", idempotency_key="gh-a", offer_id="1234567"))
    assert caught.value.kind == "capacity"


@respx.mock(base_url=BASE)
def test_invalid_key_answer_is_auth(respx_mock):
    respx_mock.get("/api/v0/users/current").respond(401, json={"success": False, "error": "auth_error",
                                                               "msg": "Invalid user key"})
    with pytest.raises(ProviderError) as caught:
        adapter()[0].check()
    assert caught.value.kind == "auth" and "$VAST_API_KEY" in str(caught.value) and KEY not in str(caught.value)


@respx.mock(base_url=BASE)
def test_destroy_and_stop_use_the_v0_instance_route(respx_mock):
    destroy = respx_mock.delete("/api/v0/instances/77/").mock(side_effect=[
        httpx.Response(200, json={"success": True}),
        httpx.Response(404, json={"error": "not_found", "msg": "Instance not found"})])
    stop = respx_mock.put("/api/v0/instances/77/").respond(200, json={"success": True})
    vast = adapter()[0]
    vast.terminate("77")
    vast.terminate("77")  # already gone is fine
    vast.stop("77")
    assert destroy.call_count == 2 and json.loads(stop.calls.last.request.content) == {"state": "stopped"}


def test_docker_options_skip_the_ssh_port():
    spec = LaunchSpec(gpu="RTX 4090", image="i", idempotency_key="gh-a", ports=("22/tcp",))
    assert docker_options(spec) == {}
