"""The Vast.ai CLI and SDK (pip `vastai` 1.9, in a venv of their own) against the simulator: every operation they
send works, and its effects show in the next call (created instances are listed, labels stick, destroyed ones go).
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from secrets import token_hex
from typing import Any

import pytest
from official_clients import isolated_env, require, run_python

from gpuharness.sim import PlaceholderHost, SimInstance, Simulator

KEY = "sim-vast-key-" + token_hex(8)  # made per run
SSH_PORT = 42_022
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def vastai() -> Path:
    return require("vastai")


@pytest.fixture
def sim_options() -> dict[str, Any]:
    return {"ready_delay_s": 0.2, "api_keys": {"vast": KEY},
            "host_factory": lambda _instance: PlaceholderHost(ssh_port=SSH_PORT, http_ports={8188: 18_188})}


class VastCli:
    """`vastai --url SIM --api-key KEY ...` in a HOME of its own (the CLI keeps its role and caches there)."""

    def __init__(self, python: Path, url: str, home: Path, key: str = KEY) -> None:
        self.executable = python.parent / "vastai"
        self.url = url
        self.key = key
        # VAST_URL: the CLI reads the GPU name list from it (without a key) before any command
        self.env = isolated_env(home, {"VAST_URL": url, "VASTAI_NO_UPDATE_CHECK": "1"})

    def run(self, *args: str, ok: bool = True) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([str(self.executable), "--url", self.url, "--api-key", self.key, *args],
                              capture_output=True, text=True, env=self.env, timeout=120)
        if ok:
            assert done.returncode == 0 and "Traceback" not in done.stderr, \
                f"vastai {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
        return done

    def raw(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--raw").stdout)


@pytest.fixture
def cli(vastai: Path, sim: Simulator, tmp_path: Path) -> VastCli:
    return VastCli(vastai, sim.url("vast"), tmp_path)


def sdk(python: Path, sim: Simulator, home: Path, body: str) -> Any:
    """Run body with `v = VastAI(...)` bound; it assigns `result`, printed as JSON."""
    code = (f"import json\nfrom vastai import VastAI\nv = VastAI(api_key={KEY!r}, server_url={sim.url('vast')!r})\n"
            f"{body}\nprint(json.dumps(result, default=str))")
    return run_python(python, code, isolated_env(home, {"VASTAI_NO_UPDATE_CHECK": "1"}))


def wait_running(sim: Simulator, instance_id: str, timeout_s: float = 10.0) -> SimInstance:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        instance = sim.state.get("vast", instance_id)
        if instance is not None and instance.status == "running":
            return instance
        time.sleep(0.05)
    raise AssertionError(f"vast instance {instance_id} never became running")


def test_offer_search_types_filters_as_the_cli_sends_them(cli: VastCli):
    one_gpu = cli.raw("search", "offers", "num_gpus=1")  # sent as {"num_gpus": {"eq": "1"}}
    cheap = cli.raw("search", "offers", "dph_total<0.5", "-o", "dph_total")
    chosen = cli.raw("search", "offers", "gpu_name in [RTX_4090,L40S] geolocation=US reliability>0.99")
    assert one_gpu and {o["num_gpus"] for o in one_gpu} == {1}
    prices = [o["dph_total"] for o in cheap]
    assert prices and max(prices) < 0.5 and prices == sorted(prices)
    assert chosen and {o["gpu_name"] for o in chosen} <= {"RTX 4090", "L40S"}
    assert all(o["geolocation"].endswith(", US") for o in chosen)


def test_offer_search_honours_order_limit_type_and_driver_versions(cli: VastCli):
    top = cli.raw("search", "offers", "--limit", "2", "-o", "dph_total-")
    bids = cli.raw("search", "offers", "gpu_name=RTX_4090", "-t", "bid")
    reserved = cli.raw("search", "offers", "gpu_name=RTX_4090", "-r")
    drivers = cli.raw("search", "offers", "driver_version >= 535.86.05")
    newer = cli.raw("search", "offers", "driver_version > 999.1.1")
    assert len(top) == 2 and top[0]["dph_total"] >= top[1]["dph_total"]
    assert bids and all(o["is_bid"] and o["dph_total"] == o["min_bid"] for o in bids)
    assert reserved and all(o["discounted_dph_total"] < o["dph_total"] for o in reserved)
    assert drivers and newer == []


def test_offer_search_new_endpoint_answers_the_same_offers(cli: VastCli):
    old = cli.raw("search", "offers", "num_gpus=2", "-o", "dph_total")
    new = cli.raw("search", "offers", "num_gpus=2", "-o", "dph_total", "--new")
    assert new and [o["id"] for o in new] == [o["id"] for o in old]


def test_a_filter_value_that_is_not_a_number_is_a_400_with_vasts_error(cli: VastCli):
    refused = cli.run("search", "offers", "num_gpus=many", ok=False)
    assert "Failed with error 400: num_gpus: 'many' is not a number" in refused.stderr


def test_created_instance_is_listed_with_its_label_env_and_ssh(cli: VastCli, sim: Simulator):
    created = cli.raw("create", "instance", "5000001", "--image", "vastai/comfy:latest", "--disk", "40",
                      "--label", "gh-dep-cli-1", "--env", "-e MODE=test -p 8188:8188", "--ssh", "--direct")
    instance_id = str(created["new_contract"])
    wait_running(sim, instance_id)
    (row,) = cli.raw("show", "instances")
    assert row["id"] == created["new_contract"] and row["label"] == "gh-dep-cli-1"
    assert row["extra_env"] == {"MODE": "test"} and row["image_runtype"] == "ssh_direc ssh_proxy"
    assert row["actual_status"] == "running" and row["ports"]["8188/tcp"][0]["HostPort"] == "18188"
    shown = cli.raw("show", "instance", instance_id)
    assert shown["disk_space"] == 40.0 and shown["image_uuid"] == "vastai/comfy:latest"
    assert cli.run("ssh-url", instance_id).stdout.strip() == f"ssh://root@127.0.0.1:{SSH_PORT}"
    assert cli.run("scp-url", instance_id).stdout.strip() == f"scp://root@127.0.0.1:{SSH_PORT}"
    table = cli.run("show", "instance", instance_id).stdout
    assert instance_id in table and "gh-dep-cli-1" in table


def test_label_sticks_and_the_v1_list_filters_by_it(cli: VastCli, sim: Simulator):
    first = cli.raw("create", "instance", "5000001", "--image", "img:1")["new_contract"]
    second = cli.raw("create", "instance", "5000011", "--image", "img:1")["new_contract"]
    assert "label for" in cli.run("label", "instance", str(second), "gh-keep").stdout
    only = cli.raw("show", "instances", "--label", "gh-keep")
    unlabeled = cli.raw("show", "instances", "--label", "")
    newest_first = cli.raw("show", "instances", "--order-by", "id desc")
    assert [r["id"] for r in only] == [second] and [r["id"] for r in unlabeled] == [first]
    assert [r["id"] for r in newest_first] == [second, first]


def test_table_views_read_the_filters_route_not_an_instance(cli: VastCli, sim: Simulator):
    made = cli.raw("create", "instance", "5000001", "--image", "img:1", "--label", "gh-table")
    wait_running(sim, str(made["new_contract"]))
    table = cli.run("show", "instances", "--status", "loading", "running").stdout
    quiet = cli.run("show", "instances", "-q").stdout.split()
    requests = sim.stats()["requests"]
    assert "gh-table" in table and len(quiet) == 1
    assert requests["GET /vast/api/v0/instances/filters/"] >= 1
    assert "GET /vast/api/v0/instances/{id}/" not in requests


def test_bulk_create_and_bulk_destroy(cli: VastCli, sim: Simulator):
    cli.run("create", "instances", "5000001", "5000011", "5000201", "--image", "img:bulk", "--label", "gh-bulk")
    ids = [r["id"] for r in cli.raw("show", "instances", "--label", "gh-bulk")]
    assert len(ids) == 3
    cli.run("destroy", "instances", *map(str, ids[:2]), "-y")
    assert [r["id"] for r in cli.raw("show", "instances")] == ids[2:]


def test_stop_start_reboot_and_destroy_change_what_show_says(cli: VastCli, sim: Simulator):
    instance_id = str(cli.raw("create", "instance", "5000001", "--image", "img:1")["new_contract"])
    wait_running(sim, instance_id)
    assert "stopping instance" in cli.run("stop", "instance", instance_id).stdout
    assert cli.raw("show", "instance", instance_id)["intended_status"] == "stopped"
    assert "starting instance" in cli.run("start", "instance", instance_id).stdout
    wait_running(sim, instance_id)
    sim.state.ready_delay_s = 60.0  # the rebooted container stays loading while we look
    assert "Rebooting instance" in cli.run("reboot", "instance", instance_id).stdout
    assert cli.raw("show", "instance", instance_id)["actual_status"] in (None, "loading")
    sim.state.ready_delay_s = 0.0
    sim.state.get("vast", instance_id).ready_at_mono = 0.0
    wait_running(sim, instance_id)
    assert "destroying instance" in cli.run("destroy", "instance", instance_id, "-y").stdout
    assert cli.raw("show", "instance", instance_id) == {"instances": None}
    assert cli.raw("show", "instances") == []


def test_logs_are_fetched_from_their_result_url(cli: VastCli, sim: Simulator):
    instance_id = str(cli.raw("create", "instance", "5000001", "--image", "img:logs")["new_contract"])
    wait_running(sim, instance_id)
    logs = cli.run("logs", instance_id).stdout
    tail = cli.run("logs", instance_id, "--tail", "1").stdout
    assert "Pulling image img:logs" in logs and "success, running" in logs
    assert tail.strip() == "success, running"


def test_show_user_and_ssh_keys_print_the_account(cli: VastCli):
    user = cli.raw("show", "user")
    keys = cli.raw("show", "ssh-keys")
    table = cli.run("show", "user").stdout
    assert user["email"] == "sim@example.invalid" and "api_key" not in user and user["credit"] > 0
    assert keys and keys[0]["public_key"].startswith("ssh-ed25519 ")
    assert "sim@example.invalid" in table


def test_a_wrong_key_is_refused_as_vast_refuses_it(vastai: Path, sim: Simulator, tmp_path: Path):
    wrong = VastCli(vastai, sim.url("vast"), tmp_path, key="not-the-sim-key-0123456789")
    refused = wrong.run("show", "instances", "--raw", ok=False)
    assert refused.returncode != 0 or "401" in refused.stderr
    assert "Invalid user key" in refused.stderr


def test_the_sdk_lists_creates_labels_and_destroys(vastai: Path, sim: Simulator, tmp_path: Path):
    result = sdk(vastai, sim, tmp_path, """
offers = v.search_offers("num_gpus=1 dph<0.5", order="dph_total")
new = v.search_offers_new("num_gpus=1", limit=3)
made = v.create_instance(offers[0]["id"], image="img:sdk", disk=20, env={"A": "b", "-p 8188:8188": "1"},
                         label="gh-sdk", ssh=True, direct=True)
listed = v.show_instances()
shown = v.show_instance(made["new_contract"])
v.label_instance(made["new_contract"], "gh-sdk-2")
relabeled = v.show_instance(made["new_contract"])["label"]
user = v.show_user()
keys = v.show_ssh_keys()
v.destroy_instance(made["new_contract"])
result = {"offers": [o["dph_total"] for o in offers], "new": len(new), "made": made, "listed": listed,
          "shown": shown, "relabeled": relabeled, "user": user["id"], "keys": len(keys), "after": v.show_instances()}
""")
    assert result["offers"] and max(result["offers"]) < 0.5 and result["new"] == 3
    (listed,) = result["listed"]
    assert listed["id"] == result["made"]["new_contract"] and listed["extra_env"] == {"A": "b"}
    assert result["shown"]["label"] == "gh-sdk" and result["relabeled"] == "gh-sdk-2"
    assert result["user"] and result["keys"] == 1 and result["after"] == []


def test_the_sdk_reads_logs_executes_and_gives_ssh_urls(vastai: Path, sim: Simulator, tmp_path: Path):
    made = sim_create(sim)
    result = sdk(vastai, sim, tmp_path, f"""
result = {{"ssh": v.ssh_url({made}), "scp": v.scp_url({made}), "logs": v.logs({made}, tail="2"),
          "ls": v.execute({made}, "ls -l"), "reboot": v.reboot_instance({made}),
          "stop": v.stop_instance({made}), "start": v.start_instance({made})}}
""")
    assert result["ssh"] == f"ssh://root@127.0.0.1:{SSH_PORT}" and result["scp"].startswith("scp://root@")
    assert result["logs"].splitlines() == ["Server listening on 0.0.0.0 port 22.", "success, running"]
    assert result["ls"].strip() == "workspace"
    assert result["reboot"] == result["stop"] == result["start"] == {"success": True}


def sim_create(sim: Simulator) -> int:
    [instance_id] = sim.create_instances("vast", 1, gpu="RTX 4090", name_prefix="gh-sdk-")
    wait_running(sim, instance_id)
    return int(instance_id)


def test_the_cli_works_against_gpuharness_sim_serve(vastai: Path, tmp_path: Path):
    served = subprocess.Popen([sys.executable, "-m", "gpuharness", "sim", "serve", "--port", "0", "--ready-delay",
                               "0.2"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert served.stdout is not None
        base = served.stdout.readline().split()[-1]
        cli = VastCli(vastai, base + "/vast", tmp_path, key="any-twenty-characters-here")
        instance_id = str(cli.raw("create", "instance", "5000001", "--image", "img:served")["new_contract"])
        deadline = time.monotonic() + 60
        while cli.raw("show", "instance", instance_id)["actual_status"] != "running":
            assert time.monotonic() < deadline, "the served instance never became running"
            time.sleep(0.2)
        url = cli.run("ssh-url", instance_id).stdout.strip()
        host, port = url.removeprefix("ssh://root@").rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as ssh:
            assert ssh.recv(64).startswith(b"SSH-2.0-")  # the simulated host's sshd answers
    finally:
        served.send_signal(signal.SIGINT)  # sim serve stops its hosts on ^C
        served.wait(timeout=30)


def test_show_invoices_and_charges_read_what_the_instance_accrued(cli: VastCli, sim: Simulator):
    """`show invoices` (GET /api/v0/users/me/invoices) and `show invoices-v1 --charges` (GET /api/v0/charges/) read
    the simulator's accrual per instance and UTC day; the adapter reads the same invoices as Charges."""
    from datetime import UTC, datetime, timedelta

    from gpuharness.providers.factory import build_provider

    instance_id = str(cli.raw("create", "instance", "5000001", "--image", "img:bill")["new_contract"])
    wait_running(sim, instance_id)
    time.sleep(0.5)
    cli.run("destroy", "instance", instance_id, "-y")
    accrued = sim.state.instances[("vast", instance_id)].accrued_usd
    invoices = cli.raw("show", "invoices")
    charges = cli.raw("show", "invoices-v1", "--charges")
    table = cli.run("show", "invoices", "--only_charges").stdout
    assert accrued > 0 and [(r["type"], r["instance_id"]) for r in invoices] == [("charge", int(instance_id))]
    assert sum(r["amount"] for r in invoices) == pytest.approx(accrued, abs=1e-6)
    assert [(c["type"], c["source"]) for c in charges["results"]] == [("instance", instance_id)]
    assert charges["total"] == 1 and charges["results"][0]["amount"] == pytest.approx(accrued, abs=1e-6)
    assert "Only showing charges." in table and f"Total: ${sum(r['amount'] for r in invoices)}" in table
    adapter = build_provider({"name": "vast", "kind": "vast", "credential_env": "K", "api_base": sim.url("vast")},
                             env={"K": KEY})
    now = datetime.now(UTC)
    (charge,) = adapter.charges(now - timedelta(days=1), now)
    assert (charge.instance_id, charge.amount_usd) == (instance_id, pytest.approx(accrued, abs=1e-6))
