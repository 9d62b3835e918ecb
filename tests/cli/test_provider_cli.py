"""`gpuharness sim serve`, `providers check` and `offers`, driven like a user would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from secrets import token_hex
from typing import Any

import httpx
import pytest

from gpuharness.cli import main
from gpuharness.core.registry import Registry
from gpuharness.sim import Simulator

SECRET = "GPUHARNESS_TEST_SECRET-" + token_hex(8)  # made per run
GOOD = "sim-good-key-0123456789abcdef"


@pytest.fixture
def sim_options() -> dict[str, Any]:
    return {"ready_delay_s": 0.0, "api_keys": {"runpod": GOOD, "vast": GOOD, "massed": GOOD}}


@pytest.fixture
def registry(tmp_path: Path, sim: Simulator) -> Registry:
    reg = Registry(tmp_path / "reg")
    reg.init()
    entries = sim.provider_entries("SIM_KEY")
    entries = [e for e in entries if e["kind"] != "runpod-serverless"]
    entries[1]["credential_env"] = "VAST_KEY"
    entries[2]["credential_env"] = "MASSED_KEY"
    reg.path("providers.json").write_text(json.dumps({"schema_version": 1, "providers": entries}))
    return reg


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sim_serve_prints_ready_and_answers_on_loopback():
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", "sim", "serve", "--port", "0"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline().strip()
        assert line.startswith("ready http://127.0.0.1:")
        stats = httpx.get(line.split()[1] + "/_sim/stats", timeout=10).json()
        assert stats["launches"] == 0 and "requests" in stats
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_sim_serve_refuses_a_non_loopback_host_with_exit_2():
    done = subprocess.run([sys.executable, "-m", "gpuharness", "sim", "serve", "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "non-loopback" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "ready" not in done.stdout


def test_providers_check_records_authenticated_and_never_echoes_the_key(capsys, monkeypatch, registry: Registry):
    monkeypatch.setenv("SIM_KEY", GOOD)
    monkeypatch.setenv("VAST_KEY", SECRET)  # a wrong key: the simulator accepts only GOOD
    monkeypatch.delenv("MASSED_KEY", raising=False)
    code, out, err = run_cli(capsys, "providers", "check", "--registry", str(registry.root))
    assert code == 1
    recorded = {p["name"]: p for p in registry.providers()}
    assert recorded["runpod"]["authenticated"] is True and recorded["runpod"]["checked_at"]
    assert recorded["vast"]["authenticated"] is False and "$VAST_KEY was refused" in out
    assert recorded["massed"]["authenticated"] is False and "$MASSED_KEY is not set" in out
    for text in (out, err, *(p.read_text() for p in registry.root.iterdir() if p.is_file())):
        assert SECRET not in text


def test_providers_check_reports_a_truncated_key_by_length(capsys, monkeypatch, registry: Registry):
    monkeypatch.setenv("SIM_KEY", SECRET[:9])
    code, out, _ = run_cli(capsys, "providers", "check", "--registry", str(registry.root), "--provider", "runpod",
                           "--json")
    (result,) = json.loads(out)
    assert code == 1 and result["authenticated"] is False
    assert "truncated" in result["detail"] and "9 characters" in result["detail"]
    assert SECRET[:9] not in out


def test_offers_are_cheapest_first_across_providers_and_marked_when_policy_refuses(capsys, monkeypatch,
                                                                                   registry: Registry):
    for name in ("SIM_KEY", "VAST_KEY", "MASSED_KEY"):
        monkeypatch.setenv(name, GOOD)
    with registry.update("policy.json") as policy:
        policy["max_cost_hr"] = 0.5
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "RTX A6000", "--json")
    offers = json.loads(out)["offers"]
    assert code == 0
    assert [o["cost_hr"] for o in offers] == sorted(o["cost_hr"] for o in offers)
    assert {o["provider"] for o in offers} == {"runpod", "vast", "massed"}
    cheap = [o for o in offers if o["cost_hr"] <= 0.5]
    dear = [o for o in offers if o["cost_hr"] > 0.5]
    assert cheap and all(o["refused"] is None for o in cheap)
    assert dear and all(o["refused"].startswith("max_cost_hr") for o in dear)


def test_offers_max_cost_hides_dearer_offers_and_text_shows_prices(capsys, monkeypatch, registry: Registry):
    for name in ("SIM_KEY", "VAST_KEY", "MASSED_KEY"):
        monkeypatch.setenv(name, GOOD)
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "RTX 4090",
                           "--max-cost-hr", "0.4")
    rows = [line for line in out.splitlines()[1:] if line.strip()]
    assert code == 0 and len(rows) == 1 and rows[0].split()[0] == "0.350" and "vast" in rows[0]


def test_offers_lists_the_others_when_one_provider_has_no_key(capsys, monkeypatch, registry: Registry):
    monkeypatch.setenv("SIM_KEY", GOOD)
    monkeypatch.setenv("VAST_KEY", GOOD)
    monkeypatch.delenv("MASSED_KEY", raising=False)
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "RTX A6000", "--json")
    payload = json.loads(out)
    assert code == 0 and {o["provider"] for o in payload["offers"]} == {"runpod", "vast"}
    assert "MASSED_KEY" in payload["failures"]["massed"]


def test_verbose_sim_log_redacts_query_keys():
    lines: list[str] = []
    with Simulator(log=lines.append) as sim:
        httpx.get(sim.base_url + "/vast/api/v1/instances/", params={"api_key": SECRET})
    assert lines and all(SECRET not in line for line in lines) and "api_key=***" in lines[0]


def test_sim_serve_configure_points_providers_json_at_the_simulator(tmp_path: Path):
    subprocess.run([sys.executable, "-m", "gpuharness", "init", "--registry", str(tmp_path / "reg")], check=True,
                   capture_output=True)  # only init creates a registry
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", "sim", "serve", "--port", "0", "--configure",
                                "--registry", str(tmp_path / "reg")],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = process.stdout.readline().strip().split()[1]
        entries = {p["name"]: p for p in Registry(tmp_path / "reg").providers()}
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert entries["vast"]["api_base"] == base + "/vast" and entries["runpod"]["api_base"] == base + "/runpod"


def test_sim_serve_starts_a_simulated_ssh_host_for_each_running_instance():
    process = subprocess.Popen([sys.executable, "-m", "gpuharness", "sim", "serve", "--port", "0",
                                "--ready-delay", "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        base = process.stdout.readline().strip().split()[1]
        httpx.post(base + "/_sim/instances", json={"provider": "vast", "count": 1, "gpu": "RTX 4090"}, timeout=10)
        listing = httpx.get(base + "/vast/api/v1/instances/", params={"limit": 25},
                            headers={"Authorization": "Bearer " + token_hex(16)}, timeout=10).json()
        [instance] = listing["instances"]
        import socket

        with socket.create_connection((instance["ssh_host"], instance["ssh_port"]), timeout=10) as sock:
            assert sock.recv(64).startswith(b"SSH-2.0-")
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_offers_exits_1_when_every_provider_refused_the_key(capsys, monkeypatch, registry: Registry):
    """Nothing asked is not a pass: the simulator (real loopback HTTP) refuses every key, so nothing was listed."""
    for name in ("SIM_KEY", "VAST_KEY", "MASSED_KEY"):
        monkeypatch.setenv(name, SECRET)  # the simulator accepts only GOOD
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "RTX A6000")
    assert code == 1
    said = [line for line in out.splitlines() if line.startswith("no provider answered")]
    assert len(said) == 1 and "gpuharness providers check" in said[0], out
    assert SECRET not in out
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "RTX A6000", "--json")
    assert code == 1 and set(json.loads(out)["failures"]) == {"runpod", "vast", "massed"}


def test_offers_exits_1_when_no_provider_lists_offers(capsys, registry: Registry):
    registry.path("providers.json").write_text(json.dumps({"schema_version": 1, "providers": []}))
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "RTX A6000")
    assert code == 1
    assert "no provider in" in out and "gpuharness providers add" in out, out


def test_offers_exits_0_when_one_provider_answered_with_no_offer(capsys, monkeypatch, registry: Registry):
    monkeypatch.setenv("SIM_KEY", GOOD)
    monkeypatch.delenv("VAST_KEY", raising=False)
    monkeypatch.delenv("MASSED_KEY", raising=False)
    code, out, _ = run_cli(capsys, "offers", "--registry", str(registry.root), "--gpu", "No Such GPU 9000")
    assert code == 0 and "no offers for" in out
