"""`gpuharness status` is a table a person can read: a header, whole names, destroyed deployments hidden unless
--all, and totals (live burn, today's billed spend against daily_usd); --json is unchanged."""

from __future__ import annotations

import json

import pytest

from gpuharness.cli import main
from tests.conftest import build_deployment

LONG_GPU = "NVIDIA GeForce RTX 4090 Laptop Engineering Sample With A Long Name"


@pytest.fixture
def estate(registry):
    deployments = [
        build_deployment("dep_live_with_a_long_identifier_0001", "ready", gpu=LONG_GPU, cost_hr=0.5,
                         shutdown_rule={"idle_minutes": 15}),
        build_deployment("dep_stopped", "stopped", gpu="A100 80GB", cost_hr=1.25),
        build_deployment("dep_gone", "destroyed", gpu="RTX 5090", cost_hr=0.6,
                         destroyed_at="2026-11-02T10:00:00Z"),
    ]
    registry.path("deployments.json").write_text(json.dumps({"schema_version": 1, "deployments": deployments}))
    policy = json.loads(registry.path("policy.json").read_text())
    registry.path("policy.json").write_text(json.dumps({**policy, "daily_usd": 12.0}))
    return registry


def status(capsys, registry, *extra: str) -> str:
    assert main(["status", "--registry", str(registry.root), *extra]) == 0
    return capsys.readouterr().out


def test_the_table_has_a_header_whole_names_and_totals(capsys, estate):
    out = status(capsys, estate)
    header = out.splitlines()[0].split()
    assert header[:5] == ["id", "provider", "instance", "gpu", "status"]
    assert LONG_GPU in out and "dep_live_with_a_long_identifier_0001" in out
    assert "live burn $0.500/hr on 1 billing deployment(s)" in out
    assert "of daily_usd $12.00" in out


def test_destroyed_deployments_are_hidden_unless_all(capsys, estate):
    out = status(capsys, estate)
    assert "dep_gone" not in out and "1 destroyed hidden (--all shows them)" in out
    assert "dep_gone" in status(capsys, estate, "--all")


def test_a_rate_that_does_not_bill_is_shown_in_brackets(capsys, estate):
    line = next(x for x in status(capsys, estate).splitlines() if "dep_stopped" in x)
    assert "(1.250)" in line


def test_json_keeps_every_deployment(capsys, estate):
    data = json.loads(status(capsys, estate, "--json"))
    assert [d["id"] for d in data["deployments"]] == ["dep_live_with_a_long_identifier_0001", "dep_stopped",
                                                     "dep_gone"]


def test_rich_markup_in_a_provider_value_is_shown_as_text(capsys, estate):
    with estate.update("deployments.json") as document:
        document["deployments"][0]["instance_id"] = "[bold red]i-1[/bold red][link=http://x]y[/link]"
    assert "[bold red]i-1[/bold red][link=http://x]y[/link]" in status(capsys, estate)
