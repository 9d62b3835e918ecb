"""RunPod Pods REST v2 adapter, unit-tested with respx on the wire shapes of
https://github.com/runpod/docs/blob/a900806e/api-reference-v2/openapi.json
and the pod as observed on the wire."""

from __future__ import annotations

import json
from secrets import token_hex

import httpx
import pytest
import respx
from provider_time import FakeTime

from gpuharness.providers.base import LaunchSpec, ProviderError
from gpuharness.providers.runpod import RunPodPods
from gpuharness.providers.transport import ProviderHttp

BASE = "https://api.runpod.io"
KEY = "rpa_" + token_hex(18)  # made per run: no key is committed

# the v2 pod as observed on the wire, runtime/ssh filled in as the wire shows them
OBSERVED_POD = {
    "actions": ["stop", "restart", "terminate"], "cloud": "SECURE", "cost": 0.72, "cudaVersion": "13.0",
    "dataCenterId": "EU-RO-1", "gpu": {"count": 1, "id": "NVIDIA RTX PRO 4500 Blackwell"},
    "id": "5xpma5eg46tqjq", "name": "gh-dep-a1",
    "runtime": {"ports": [{"ip": "213.173.104.74", "private": 22, "public": 35558, "type": "tcp"}]},
    "ssh": {"direct": {"host": "213.173.104.74", "port": 35558, "username": "root",
                       "command": "ssh root@213.173.104.74 -p 35558"},
            "proxy": {"host": "ssh.runpod.io", "port": 22}},
    "status": "RUNNING",
}


def adapter(fake: FakeTime | None = None) -> RunPodPods:
    fake = fake or FakeTime()
    return RunPodPods("runpod", ProviderHttp("runpod", BASE, KEY, credential_env="RUNPOD_API_KEY",
                                             sleep=fake.sleep, monotonic=fake.monotonic, wall=fake.wall,
                                             rng=fake.rng()))


@respx.mock(base_url=BASE)
def test_list_reads_the_wrapped_pods_array_and_normalizes(respx_mock):
    respx_mock.get("/v2/pods").respond(200, json={"pods": [OBSERVED_POD]})
    (pod,) = adapter().list_instances()
    assert (pod.id, pod.status, pod.raw_status, pod.cost_hr) == ("5xpma5eg46tqjq", "running", "RUNNING", 0.72)
    assert pod.gpu == "NVIDIA RTX PRO 4500 Blackwell" and pod.region == "EU-RO-1"
    assert (pod.ssh.host, pod.ssh.port, pod.ssh.user) == ("213.173.104.74", 35558, "root")
    assert pod.idempotency_key == "gh-dep-a1"


@respx.mock(base_url=BASE)
def test_running_before_ports_exist_is_still_pending(respx_mock):
    early = {**OBSERVED_POD, "runtime": None, "ssh": {"direct": None, "proxy": {"host": "ssh.runpod.io"}}}
    respx_mock.get("/v2/pods/5xpma5eg46tqjq").respond(200, json=early)
    pod = adapter().get_instance("5xpma5eg46tqjq")
    assert pod is not None and (pod.status, pod.raw_status) == ("pending", "RUNNING") and pod.ssh is None


@respx.mock(base_url=BASE)
def test_v1_shaped_fields_are_tolerated(respx_mock):
    v1 = {"id": "xedezhzb9la3ye", "name": "gh-x", "desiredStatus": "EXITED", "costPerHr": "1.59",
          "adjustedCostPerHr": None, "gpuCount": 2, "publicIp": "203.0.113.9", "portMappings": {"22": 10341},
          "createdAt": "2026-08-20 06:16:19.436 +0000 UTC", "machine": {}}
    respx_mock.get("/v2/pods").respond(200, json=[v1])
    (pod,) = adapter().list_instances()
    assert (pod.status, pod.cost_hr, pod.gpu_count) == ("stopped", 1.59, 2)
    assert (pod.ssh.host, pod.ssh.port) == ("203.0.113.9", 10341)
    assert pod.created_at == "2026-08-20T06:16:19.436Z"


@respx.mock(base_url=BASE)
def test_get_of_a_gone_pod_is_none(respx_mock):
    respx_mock.get("/v2/pods/gone").respond(404, json={"title": "Not Found", "status": 404, "detail": "pod not found"})
    assert adapter().get_instance("gone") is None


@respx.mock(base_url=BASE)
def test_launch_sends_the_nested_v2_body_with_the_key_as_name(respx_mock):
    route = respx_mock.post("/v2/pods").respond(201, json={**OBSERVED_POD, "status": "PROVISIONING",
                                                           "runtime": None, "ssh": {"direct": None}})
    spec = LaunchSpec(gpu="NVIDIA GeForce RTX 4090", image="runpod/pytorch:2.4.0", idempotency_key="gh-dep-a1",
                      ports=("22/tcp", "8188/http"), env={"PUBLIC_KEY": "ssh-ed25519 AAAA"})
    pod = adapter().launch(spec)
    sent = json.loads(route.calls.last.request.content)
    assert sent["name"] == "gh-dep-a1" and sent["gpu"] == {"id": "NVIDIA GeForce RTX 4090", "count": 1}
    assert sent["image"] == "runpod/pytorch:2.4.0" and sent["ports"] == ["22/tcp", "8188/http"]
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"
    assert pod.status == "pending"


@pytest.mark.parametrize(("body", "kind", "words"), [
    ({"error": "create pod: There are no instances currently available", "status": 500}, "capacity",
     "another GPU type"),
    ({"error": "create pod: Your account balance is too low to rent a pod. Please add funds to your account.",
      "status": 500}, "balance", "add funds"),
])
def test_launch_500_with_error_text_is_classified_by_text(body, kind, words):
    with respx.mock(base_url=BASE) as mock, pytest.raises(ProviderError) as caught:
        mock.post("/v2/pods").respond(500, json=body)
        adapter().launch(LaunchSpec(gpu="NVIDIA GeForce RTX 4090", image="i", idempotency_key="gh-a"))
    assert caught.value.kind == kind and words in str(caught.value)


@respx.mock(base_url=BASE)
def test_v2_capacity_as_400_problem_detail_is_capacity(respx_mock):
    respx_mock.post("/v2/pods").respond(400, json={
        "detail": "There are no longer any instances available with the requested specifications. Please refresh "
                  "and try again.", "status": 400, "title": "Bad Request"})
    with pytest.raises(ProviderError) as caught:
        adapter().launch(LaunchSpec(gpu="NVIDIA H100 80GB HBM3", image="i", idempotency_key="gh-a"))
    assert caught.value.kind == "capacity"


@respx.mock(base_url=BASE)
def test_terminate_uses_the_action_route_and_accepts_already_gone(respx_mock):
    route = respx_mock.post("/v2/pods/abc/action").mock(side_effect=[
        httpx.Response(204), httpx.Response(404, json={"title": "Not Found", "status": 404, "detail": "gone"})])
    adapter().terminate("abc")
    adapter().terminate("abc")
    assert [json.loads(c.request.content) for c in route.calls] == [{"action": "terminate"}] * 2


@respx.mock(base_url=BASE)
def test_stop_in_a_wrong_state_is_an_invalid_request(respx_mock):
    respx_mock.post("/v2/pods/abc/action").respond(409, json={"title": "Conflict", "status": 409,
                                                              "detail": "cannot stop a pod in state EXITED"})
    with pytest.raises(ProviderError) as caught:
        adapter().stop("abc")
    assert caught.value.kind == "invalid" and "EXITED" in str(caught.value)


@respx.mock(base_url=BASE)
def test_gpu_type_offers_match_the_short_name(respx_mock):
    respx_mock.post("/graphql").respond(200, json={"data": {"gpuTypes": [
        {"id": "NVIDIA GeForce RTX 4090", "displayName": "RTX 4090", "memoryInGb": 24, "securePrice": 0.69,
         "communityPrice": 0.34},
        {"id": "NVIDIA GeForce RTX 5090", "displayName": "RTX 5090", "memoryInGb": 32, "securePrice": 0.94}]}})
    offers = adapter().offers("RTX 4090")
    assert [(o.gpu, o.cost_hr) for o in offers] == [("NVIDIA GeForce RTX 4090", 0.69)]


@respx.mock(base_url=BASE)
def test_an_unexpected_list_shape_is_a_clear_error(respx_mock):
    respx_mock.get("/v2/pods").respond(200, json={"pods": "nope"})
    with pytest.raises(ProviderError, match="expected a list of objects"):
        adapter().list_instances()


@respx.mock(base_url=BASE)
def test_gpu_types_come_from_the_graphql_query_as_the_sdk_asks(respx_mock):
    graphql = respx_mock.post("/graphql").respond(200, json={"data": {"gpuTypes": [
        {"id": "NVIDIA GeForce RTX 4090", "displayName": "RTX 4090", "memoryInGb": 24, "securePrice": 0.69,
         "communityPrice": 0.34}]}})
    offers = adapter().offers("RTX 4090")
    assert [(o.gpu, o.cost_hr) for o in offers] == [("NVIDIA GeForce RTX 4090", 0.69)]
    assert "gpuTypes" in json.loads(graphql.calls.last.request.content)["query"]


@respx.mock(base_url=BASE)
def test_graphql_errors_with_http_200_are_raised_classified(respx_mock):
    respx_mock.post("/graphql").respond(200, json={"errors": [{"message": "Something went wrong.",
                                                               "extensions": {"code": "INTERNAL_SERVER_ERROR"}}]})
    with pytest.raises(ProviderError, match="Something went wrong"):
        adapter().offers("RTX 4090")
