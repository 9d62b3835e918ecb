"""Massed Compute adapter, unit-tested with respx on the wire shapes of
https://vm-docs.massedcompute.com/api/v1."""

from __future__ import annotations

import json
from secrets import token_hex

import pytest
import respx
from provider_time import FakeTime

from gpuharness.providers.base import LaunchSpec, ProviderError
from gpuharness.providers.massed import MassedCompute
from gpuharness.providers.transport import ProviderHttp

BASE = "https://vm.massedcompute.com"
KEY = "mc_TESTKEY_" + token_hex(13)  # made per run

VENDOR_EXAMPLE = {"uuid": "8b52a46b-a892-4fde-925c-6d13226908f7", "name": "gh-dep-m1", "ip": "1.1.1.1",
                  "username": "Ubuntu", "status": "rented", "os_booted": 1, "command_startup": "",
                  "created": "2024-08-07T16:41:43.000Z", "active": 1,
                  "image": {"id": 7, "name": "Art", "description": ".."},
                  "product": {"name": "gpu_1x_l40", "description": "1x L40", "gpu_count": 1, "vcpu": 26, "ram": 128,
                              "storage": 625, "price_hr": "0.99", "final_price_hr": "0"}}


def adapter() -> MassedCompute:
    fake = FakeTime()
    return MassedCompute("massed", ProviderHttp("massed", BASE, KEY, credential_env="MASSED_API_KEY",
                                                sleep=fake.sleep, monotonic=fake.monotonic, wall=fake.wall,
                                                rng=fake.rng()))


@respx.mock(base_url=BASE)
def test_list_reads_the_running_instances_envelope(respx_mock):
    respx_mock.get("/api/v1/instance").respond(200, json={"runningInstances": [VENDOR_EXAMPLE]})
    (found,) = adapter().list_instances()
    assert (found.id, found.status, found.raw_status) == ("8b52a46b-a892-4fde-925c-6d13226908f7", "running",
                                                          "rented")
    assert found.cost_hr == 0.99 and found.gpu == "L40" and found.gpu_count == 1
    assert (found.ssh.host, found.ssh.port, found.ssh.user) == ("1.1.1.1", 22, "Ubuntu")
    assert found.idempotency_key == "gh-dep-m1" and found.created_at == "2024-08-07T16:41:43.000Z"


@respx.mock(base_url=BASE)
def test_get_accepts_the_real_array_envelope_and_the_specs_single_one(respx_mock):
    respx_mock.get("/api/v1/instance/a").respond(200, json={"runningInstances": [VENDOR_EXAMPLE]})
    respx_mock.get("/api/v1/instance/b").respond(200, json={"runningInstance": {**VENDOR_EXAMPLE, "uuid": "b"}})
    respx_mock.get("/api/v1/instance/c").respond(404, json={"message": "Instance not found"})
    massed = adapter()
    assert massed.get_instance("a").id == VENDOR_EXAMPLE["uuid"]
    assert massed.get_instance("b").id == "b"
    assert massed.get_instance("c") is None


@respx.mock(base_url=BASE)
def test_launch_answers_202_with_the_uuid_in_response(respx_mock):
    route = respx_mock.post("/api/v1/instance/launch").respond(
        202, json={"response": "8b52a46b-a892-4fde-925c-6d13226908f7"})
    found = adapter().launch(LaunchSpec(gpu="gpu_1x_l40", image="7", idempotency_key="gh-dep-m1"))
    body = json.loads(route.calls.last.request.content)
    assert body == {"imageId": 7, "productName": "gpu_1x_l40", "regionName": "any", "instanceName": "gh-dep-m1"}
    assert found.id == "8b52a46b-a892-4fde-925c-6d13226908f7" and found.status == "pending"


def a6000_for_sale(respx_mock) -> respx.Route:
    """One RTX A6000 product at 57 cents an hour and one image; returns the launch route."""
    respx_mock.get("/api/v1/gpu-inventory").respond(200, json={"gpu_inventory": {"gpu_1x_a6000": {
        "instance_type": {"name": "gpu_1x_a6000", "description": "1x RTX A6000", "price_cents_per_hour": 57,
                          "specs": {"vcpu_count": 6, "memory_gib": 48, "storage_gb": 256}},
        "regions_with_capacity_available": [{"name": "us-central-3", "description": "Des Moines, IA"}],
        "capacity_available": 5}}})
    respx_mock.get("/api/v1/images").respond(200, json={"images": [
        {"vm_image_id": 7, "vm_image_name": "Ubuntu Server 22.04 w/ drivers", "vm_image_description": ".."}]})
    return respx_mock.post("/api/v1/instance/launch").respond(202, json={"response": "u-1"})


@respx.mock(base_url=BASE)
def test_launch_resolves_a_gpu_name_and_image_name(respx_mock):
    route = a6000_for_sale(respx_mock)
    adapter().launch(LaunchSpec(gpu="RTX A6000", image="Ubuntu Server 22.04 w/ drivers", idempotency_key="gh-a"))
    body = json.loads(route.calls.last.request.content)
    assert (body["imageId"], body["productName"]) == (7, "gpu_1x_a6000")


@respx.mock(base_url=BASE, assert_all_called=False)
def test_launch_holds_the_price_limit_and_creates_nothing_above_it(respx_mock):
    route = a6000_for_sale(respx_mock)
    with pytest.raises(ProviderError, match=r"\$0.570/hr, above the allowed \$0.500/hr") as info:
        adapter().launch(LaunchSpec(gpu="RTX A6000", image="Ubuntu Server 22.04 w/ drivers", idempotency_key="gh-a",
                                    max_cost_hr=0.5))
    assert info.value.kind == "invalid" and not route.called


@respx.mock(base_url=BASE)
def test_402_on_launch_is_a_balance_error_with_advice(respx_mock):
    respx_mock.post("/api/v1/instance/launch").respond(402, json={"message": "Payment Required"})
    with pytest.raises(ProviderError) as caught:
        adapter().launch(LaunchSpec(gpu="gpu_1x_l40", image="7", idempotency_key="gh-a"))
    assert caught.value.kind == "balance" and "billing" in str(caught.value)


def test_stop_is_refused_as_unsupported():
    massed = adapter()
    assert massed.capabilities.stop_start is False
    with pytest.raises(ProviderError) as caught:
        massed.stop("x")
    assert caught.value.kind == "unsupported"


@respx.mock(base_url=BASE)
def test_terminate_posts_instance_uuids(respx_mock):
    route = respx_mock.post("/api/v1/instance/terminate").respond(202, json={"response": {"data": {
        "terminated_instances": [{"id": "u-1", "status": "terminated"}]}}})
    adapter().terminate("u-1")
    assert json.loads(route.calls.last.request.content) == {"instanceUuids": ["u-1"]}


@respx.mock(base_url=BASE)
def test_inventory_offers_are_cheapest_first_in_dollars(respx_mock):
    respx_mock.get("/api/v1/gpu-inventory").respond(200, json={"gpu_inventory": {
        "gpu_2x_l40": {"instance_type": {"name": "gpu_2x_l40", "description": "2x L40", "price_cents_per_hour": 198},
                       "regions_with_capacity_available": [], "capacity_available": 0},
        "gpu_1x_l40": {"instance_type": {"name": "gpu_1x_l40", "description": "1x L40", "price_cents_per_hour": 99},
                       "regions_with_capacity_available": [{"name": "us-central-3"}], "capacity_available": 3}}})
    offers = adapter().offers("L40")
    assert [(o.offer_id, o.cost_hr, o.gpu_count, o.available) for o in offers] == [
        ("gpu_1x_l40", 0.99, 1, 3), ("gpu_2x_l40", 1.98, 2, 0)]


@respx.mock(base_url=BASE)
def test_check_posts_token_validation(respx_mock):
    route = respx_mock.post("/api/v1/account/token/validation").respond(200, json={"message": "Valid Token"})
    adapter().check()
    assert route.calls.last.request.headers["Authorization"] == f"Bearer {KEY}"
