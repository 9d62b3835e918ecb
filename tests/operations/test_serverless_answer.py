"""Whether a deployment is a serverless endpoint is answered once: by its record (its runtime has no host of ours:
Deployment.is_serverless). Provision writes that answer from the provider's kind, refusing a request that
contradicts it; every later phase, destroy included, reads the record."""

from __future__ import annotations

import pytest
from lifecycle_fakes import make_world

from gpuharness.core.errors import UserError
from gpuharness.core.runtimes import RUNTIMES, serverless
from gpuharness.operations.destroy import destroy
from gpuharness.operations.provision import ProvisionRequest, provision

ENDPOINT = {"name": "rp-sls", "kind": "runpod-serverless", "endpoint_id": "abc123",
            "api_base": "http://127.0.0.1:9/runpod-serverless"}


def request(**fields):
    base = dict(provider="vast", gpu="RTX 4090", image="comfyui:latest", cost_hr=0.5, runtime="comfyui",
                model="minimax-h3", workflow="h3-text-to-video", idle_minutes=15)
    base.update(fields)
    return ProvisionRequest(**base)


def _with_endpoint(tmp_path):
    world = make_world(tmp_path)
    with world.registry.update("providers.json") as doc:
        doc["providers"].append(dict(ENDPOINT))
    return world


@pytest.mark.parametrize("runtime", [name for name, entry in RUNTIMES.items() if entry.has_host])
def test_a_serverless_provider_refuses_a_runtime_with_a_host(tmp_path, runtime):
    world = _with_endpoint(tmp_path)
    with pytest.raises(UserError) as refused:
        provision(world.ctx, request(provider="rp-sls", runtime=runtime))
    line = refused.value.line()
    assert f"--runtime {runtime}" in line and "serverless endpoint" in line and "nothing was" in line
    assert world.registry.deployments() == [] and world.provider.launch_calls == 0


def test_a_provider_renting_instances_refuses_the_serverless_runtime(tmp_path):
    world = make_world(tmp_path)
    with pytest.raises(UserError) as refused:
        provision(world.ctx, request(runtime=serverless()))
    assert "instance" in refused.value.line() and world.provider.launch_calls == 0
    assert world.registry.deployments() == []


def test_a_serverless_endpoint_is_serverless_by_its_record_whatever_runtime_was_asked(tmp_path):
    world = _with_endpoint(tmp_path)
    for asked in (None, serverless()):
        deployment = provision(world.ctx, request(provider="rp-sls", runtime=asked,
                                                  deployment_id=f"dep_sls_{asked}")).deployment
        assert deployment.runtime == serverless() and deployment.is_serverless


def test_destroy_closes_a_serverless_endpoint_by_its_record_even_when_its_provider_entry_is_gone(tmp_path):
    world = _with_endpoint(tmp_path)
    deployment = provision(world.ctx, request(provider="rp-sls", runtime=None)).deployment
    with world.registry.update("providers.json") as doc:
        doc["providers"] = [p for p in doc["providers"] if p["name"] != "rp-sls"]
    result = destroy(world.ctx, deployment.id, confirm=deployment.id)
    assert result.terminate_calls == 0 and world.registry.deployment(deployment.id).status == "destroyed"
    assert world.provider.terminate_calls == 0
