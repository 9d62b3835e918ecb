"""Building providers from providers.json entries: credentials from the environment, never echoed."""

from __future__ import annotations

import json
from pathlib import Path
from secrets import token_hex

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.providers.base import LaunchSpec, ProviderError
from gpuharness.providers.factory import build_provider, build_serverless, credential, default_api_base
from gpuharness.providers.massed import MassedCompute
from gpuharness.providers.owned import OwnedServers
from gpuharness.providers.runpod import RunPodPods
from gpuharness.providers.vast import VastAi

SECRET = "GPUHARNESS_TEST_SECRET-" + token_hex(2)  # made per run


def entry(kind: str = "runpod", **extra) -> dict:
    return {"name": kind, "kind": kind, "credential_env": "PROVIDER_KEY", **extra}


def test_missing_variable_is_a_user_error_naming_the_variable():
    with pytest.raises(UserError) as caught:
        credential(entry(), {})
    assert "$PROVIDER_KEY is not set" in caught.value.line() and "export PROVIDER_KEY" in caught.value.line()


def test_truncated_key_is_reported_by_length_without_echoing_it():
    with pytest.raises(UserError) as caught:
        credential(entry(), {"PROVIDER_KEY": SECRET[:12]})
    line = caught.value.line()
    assert "truncated" in line and "12 characters" in line
    assert SECRET[:12] not in line


def test_key_with_inner_whitespace_is_refused_and_not_echoed():
    damaged = "GPUHARNESS_TEST_SECRET 5c1d-but-pasted-twice"
    with pytest.raises(UserError) as caught:
        credential(entry(), {"PROVIDER_KEY": damaged})
    assert "GPUHARNESS_TEST_SECRET" not in caught.value.line()


def test_trailing_newline_from_a_file_is_stripped():
    assert credential(entry(), {"PROVIDER_KEY": SECRET + "-long-enough\n"}) == SECRET + "-long-enough"


def test_entry_without_credential_env_is_a_user_error():
    with pytest.raises(UserError, match="credential_env"):
        credential({"name": "vast", "kind": "vast"}, {})


@pytest.mark.parametrize(("kind", "cls"), [("runpod", RunPodPods), ("vast", VastAi), ("massed", MassedCompute)])
def test_each_kind_builds_its_adapter_with_the_real_default_host(kind, cls):
    built = build_provider(entry(kind), env={"PROVIDER_KEY": SECRET + "-long-enough"})
    assert isinstance(built, cls)
    assert built.http.http.base_url.rstrip("/") == default_api_base(kind)
    built.close()


def test_api_base_from_the_entry_wins():
    built = build_provider(entry("vast", api_base="http://127.0.0.1:8765/vast"),
                           env={"PROVIDER_KEY": SECRET + "-long-enough"})
    assert built.http.http.base_url.rstrip("/") == "http://127.0.0.1:8765/vast"


def test_unknown_kind_and_serverless_without_endpoint_are_user_errors():
    with pytest.raises(UserError, match="unknown kind"):
        build_provider({"name": "x", "kind": "lambda"}, env={})
    with pytest.raises(UserError, match="endpoint_id"):
        build_serverless(entry("runpod-serverless"), env={"PROVIDER_KEY": SECRET + "-long-enough"})


def test_owned_servers_come_from_machines_json_and_refuse_launch(tmp_path: Path):
    registry = Registry(tmp_path)
    registry.init()
    machines = {"schema_version": 1, "machines": [
        {"provider": "homelab", "instance_id": "box1", "gpu": "RTX 4090", "gpu_count": 2, "cost_hr": 0.0,
         "status": "running", "observed_at": "2026-11-30T10:00:00Z",
         "ssh": {"host": "10.0.0.5", "port": 2222, "user": "ops"}},
        {"provider": "vast", "instance_id": "1", "observed_at": "2026-11-30T10:00:00Z"}]}
    (tmp_path / "machines.json").write_text(json.dumps(machines))
    owned = build_provider({"name": "homelab", "kind": "owned"}, registry=registry)
    assert isinstance(owned, OwnedServers)
    (box,) = owned.list_instances()
    assert (box.id, box.gpu_count, box.ssh.host, box.ssh.port, box.ssh.user) == ("box1", 2, "10.0.0.5", 2222, "ops")
    with pytest.raises(ProviderError) as caught:
        owned.launch(LaunchSpec(gpu="RTX 4090", image="x", idempotency_key="gh-a"))
    assert caught.value.kind == "unsupported"
