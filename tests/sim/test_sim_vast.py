"""The simulated Vast API over loopback HTTP: the offer query language as the CLI types it, the v1 list's
filters / order / columns / keyset pages, the instance record's fields, and the account routes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from secrets import token_hex

import httpx
import pytest

from gpuharness.sim import Simulator

KEY = "sim-vast-key-" + token_hex(8)  # made per run


@pytest.fixture
def vast(sim: Simulator) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url("vast"), headers={"Authorization": f"Bearer {KEY}"}, timeout=10) as client:
        yield client


def search(vast: httpx.Client, **query: object) -> list[dict]:
    answer = vast.post("/api/v0/bundles/", json=query)
    assert answer.status_code == 200, answer.text
    return answer.json()["offers"]


def v1(vast: httpx.Client, **params: object) -> dict:
    encoded = {k: v if isinstance(v, str | int) else json.dumps(v) for k, v in params.items()}
    answer = vast.get("/api/v1/instances/", params=encoded)
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_numbers_sent_as_strings_compare_as_numbers(vast: httpx.Client):
    assert {o["num_gpus"] for o in search(vast, num_gpus={"eq": "2"})} == {2}
    cheap = search(vast, dph_total={"lt": "0.5"}, gpu_ram={"gte": "24000.0"})
    assert cheap and all(o["dph_total"] < 0.5 and o["gpu_ram"] >= 24000 for o in cheap)
    assert search(vast, num_gpus={"eq": 1}) == search(vast, num_gpus={"eq": "1"})


def test_in_notin_neq_and_booleans_as_the_cli_sends_them(vast: httpx.Client):
    picked = search(vast, gpu_name={"in": ["RTX 4090", "H100 SXM"]}, num_gpus={"neq": "2"})
    assert picked and {o["gpu_name"] for o in picked} <= {"RTX 4090", "H100 SXM"}
    assert all(o["num_gpus"] == 1 for o in picked)
    assert not any(o["geolocation"].endswith("NO") for o in search(vast, geolocation={"notin": ["NO"]}))
    assert search(vast, verified={"eq": "true"}) == search(vast, verified={"eq": True})
    assert search(vast, verified={"eq": False}) == []


def test_order_limit_and_type(vast: httpx.Client):
    ordered = search(vast, order=[["num_gpus", "desc"], ["dph_total", "asc"]], limit=3)
    assert len(ordered) == 3 and [o["num_gpus"] for o in ordered] == [2, 2, 2]
    assert [o["dph_total"] for o in ordered] == sorted(o["dph_total"] for o in ordered)
    default = search(vast)
    assert [o["score"] for o in default] == sorted((o["score"] for o in default), reverse=True)
    assert all(o["is_bid"] for o in search(vast, type="bid"))


@pytest.mark.parametrize(("query", "message"), [
    ({"num_gpus": {"eq": "two"}}, "num_gpus: 'two' is not a number"),
    ({"num_gpus": {"about": 1}}, "unknown operator 'about'"),
    ({"gpu_name": {"in": "RTX 4090"}}, "in takes a list"),
    ({"verified": {"eq": "maybe"}}, "not a boolean"),
    ({"type": "spot"}, "type must be one of"),
    ({"order": [["dph_total", "up"]]}, "asc or desc"),
    ({"limit": "5"}, "limit must be"),
])
def test_a_query_the_server_refuses_is_a_400_in_vasts_shape(vast: httpx.Client, query: dict, message: str):
    answer = vast.post("/api/v0/bundles/", json=query)
    assert answer.status_code == 400
    body = answer.json()
    assert body["success"] is False and body["error"] == "invalid_args" and message in body["msg"]


def test_search_asks_takes_the_query_under_q(vast: httpx.Client):
    answer = vast.put("/api/v0/search/asks/", json={"select_cols": ["*"], "q": {"num_gpus": {"eq": "2"}}})
    assert answer.status_code == 200 and {o["num_gpus"] for o in answer.json()["offers"]} == {2}


def test_instance_record_has_every_field_the_client_reads(sim: Simulator, vast: httpx.Client):
    made = vast.put("/api/v0/asks/5000001/", json={"client_id": "me", "image": "img:1", "disk": 32, "label": "gh-r",
                                                   "env": {"A": "b", "-p 8188:8188": "1"},
                                                   "runtype": "ssh_direc ssh_proxy"})
    row = vast.get(f"/api/v0/instances/{made.json()['new_contract']}/", params={"owner": "me"}).json()["instances"]
    for field in ("start_date", "extra_env", "image_runtype", "ssh_host", "ssh_port", "ports", "public_ipaddr",
                  "cpu_cores_effective", "cpu_ram", "inet_up", "inet_down", "reliability2", "duration",
                  "uptime_mins", "gpu_util", "disk_usage", "disk_util", "volume_info", "verification",
                  "template_id", "template_name", "geolocation", "status_msg", "machine_id"):
        assert field in row, field
    assert row["extra_env"] == [["A", "b"]] and row["image_runtype"] == "ssh_direc ssh_proxy"
    assert isinstance(row["start_date"], float) and row["disk_space"] == 32.0


def test_legacy_docker_flag_env_strings_are_still_read(vast: httpx.Client):
    made = vast.put("/api/v0/asks/5000001/", json={"image": "img", "env": "-e A=b -e C='d e' -p 8188:8188"})
    row = vast.get(f"/api/v0/instances/{made.json()['new_contract']}/").json()["instances"]
    assert row["extra_env"] == [["A", "b"], ["C", "d e"]]


@pytest.mark.parametrize(("body", "code"), [
    ({"image": ""}, "invalid_args"), ({"image": "i", "disk": "big"}, "invalid_args"),
    ({"image": "i", "env": 3}, "invalid_args"), ({"image": "i", "price": -1}, "invalid_price"),
    ({"image": "i", "runtype": "telnet"}, "invalid_args"),
])
def test_create_refuses_bad_fields(vast: httpx.Client, body: dict, code: str):
    answer = vast.put("/api/v0/asks/5000001/", json=body)
    assert answer.status_code == 400 and answer.json()["error"] == code


def test_v1_list_filters_orders_and_selects_columns(sim: Simulator, vast: httpx.Client):
    ids = sim.create_instances("vast", 4, gpu="RTX 4090", name_prefix="gh-a-")
    vast.put(f"/api/v0/instances/{ids[1]}/", json={"label": "gh-special"})
    vast.put(f"/api/v0/instances/{ids[2]}/", json={"label": None})
    only = v1(vast, select_filters={"label": {"in": ["gh-special"]}})
    unlabeled = v1(vast, select_filters={"label": {"in": [None]}})
    newest = v1(vast, order_by=[{"col": "id", "dir": "desc"}], select_cols=["id", "label"])
    assert [r["id"] for r in only["instances"]] == [int(ids[1])] and only["total_instances"] == 1
    assert [r["id"] for r in unlabeled["instances"]] == [int(ids[2])]
    assert [r["id"] for r in newest["instances"]] == [int(i) for i in reversed(ids)]
    assert set(newest["instances"][0]) == {"id", "label"}
    assert newest["label_counts"] == {"": 1, "gh-a-00000": 1, "gh-a-00003": 1, "gh-special": 1}


def test_v1_keyset_pages_survive_a_deletion_between_pages(sim: Simulator, vast: httpx.Client):
    ids = [int(i) for i in sim.create_instances("vast", 7)]
    first = v1(vast, limit=3, order_by=[{"col": "id", "dir": "desc"}])
    vast.request("DELETE", f"/api/v0/instances/{first['instances'][-1]['id']}/", json={})  # the token names it
    rest = v1(vast, limit=25, order_by=[{"col": "id", "dir": "desc"}], after_token=first["next_token"])
    assert [r["id"] for r in first["instances"]] == ids[::-1][:3]
    assert [r["id"] for r in rest["instances"]] == ids[::-1][3:] and rest["next_token"] is None


@pytest.mark.parametrize(("params", "code"), [
    ({"select_filters": "{not json"}, "invalid_request"), ({"order_by": "[1]"}, "invalid_request"),
    ({"select_cols": '["no_such_column"]'}, "invalid_request"), ({"limit": "0"}, "invalid_request"),
    ({"after_token": "not-a-token"}, "invalid_token"),
])
def test_v1_list_refuses_bad_parameters(sim: Simulator, vast: httpx.Client, params: dict, code: str):
    sim.create_instances("vast", 1)
    answer = vast.get("/api/v1/instances/", params=params)
    assert answer.status_code == 400 and answer.json()["error"] == code


def test_bulk_routes_and_the_filters_route(sim: Simulator, vast: httpx.Client):
    made = vast.post("/api/v0/asks/bulk/", json={"ids": [5000001, 5000011], "image": "img", "label": "gh-b"})
    ids = made.json()["new_contracts"]
    assert vast.put("/api/v0/instances/", json={"ids": ids, "state": "stopped"}).json() == {"success": True}
    assert {r["intended_status"] for r in v1(vast)["instances"]} == {"stopped"}
    assert vast.get("/api/v0/instances/filters/").json()["filters"] == [
        {"actual_status": "stopped", "verification": "verified", "gpu_name": "RTX 4090"}]
    assert vast.request("DELETE", "/api/v0/instances/", json={"instance_ids": ids}).json()["success"]
    assert v1(vast)["instances"] == []
    missing = vast.post("/api/v0/asks/bulk/", json={"ids": [5000001, 1], "image": "img"})
    assert missing.status_code == 404 and missing.json()["error"] == "no_such_ask" and v1(vast)["instances"] == []


def test_gpu_names_and_result_urls_need_no_key(sim: Simulator, vast: httpx.Client):
    [instance_id] = sim.create_instances("vast", 1)
    assert "RTX 4090" in httpx.get(sim.url("vast") + "/api/v0/gpu_names/unique/").json()["gpu_names"]
    logs = vast.put(f"/api/v0/instances/request_logs/{instance_id}/", json={"filter": "sshd"}).json()
    assert httpx.get(logs["result_url"]).text == "Starting sshd\n"
    refused = vast.put(f"/api/v0/instances/command/{instance_id}/", json={"command": "reboot now"})
    assert refused.status_code == 400 and "not allowed" in refused.json()["msg"]
    assert httpx.get(sim.url("vast") + "/results/nope").status_code == 404
