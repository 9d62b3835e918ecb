"""Jobs on a RunPod Serverless deployment (an endpoint, no SSH) against the simulator's serverless wire."""

from __future__ import annotations

from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import KEY_ENVS, MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.destroy import destroy
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.operations.run import run_job
from gpuharness.operations.serverless_job import outputs_of

DEP = "dep_sls_01"


def test_serverless_outputs_are_urls_already_off_the_workers():
    found = outputs_of({"images": ["https://cdn.example/a.png", "not a url"], "video": {"url": "s3://b/c.mp4"}})
    assert [(a["name"], a["uri"]) for a in found] == [("images-1", "https://cdn.example/a.png"),
                                                      ("url-2", "s3://b/c.mp4")]
    assert all(a["synced_at"] for a in found)


def test_serverless_deployment_runs_jobs_and_closes_without_a_terminate(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        with lab.registry.update("providers.json") as doc:
            doc["providers"].append({"name": "rp-sls", "kind": "runpod-serverless",
                                     "credential_env": KEY_ENVS["runpod"], "endpoint_id": "ep-h3",
                                     "api_base": lab.sim.url("runpod-serverless")})
        provision(lab.ctx, ProvisionRequest(provider="rp-sls", gpu="RTX 4090", image="worker:1", cost_hr=0.5,
                                            model=MODEL, workflow=WORKFLOW, max_hours=1, deployment_id=DEP))
        dep = lab.registry.deployment(DEP)
        assert dep.status == "health-checking" and dep.ssh is None and dep.instance_id == "ep-h3"
        from gpuharness.core.lifecycle import transition  # stands in for the health suite (serverless health: F)
        transition(lab.registry, DEP, "ready", ready_at=dep.created_at, health={"status": "passed"})
        ok = run_job(lab.ctx, DEP, inputs={"text": "a cat"}, poll_s=0.05)
        failed = run_job(lab.ctx, DEP, inputs={"text": "x", "fail": True}, poll_s=0.05)
        assert ok.status == "completed"
        # an unknown cause with nothing transient in its log is not retried blindly (issue 20 item 7)
        assert failed.status == "failed" and failed.attempts == 1
        assert lab.registry.deployment(DEP).status == "ready"
        statuses = [r["status"] for r in Ledger(lab.registry.ledger_path).records()]
        assert statuses == ["running", "completed", "running", "failed"]
        result = destroy(lab.ctx, DEP, confirm=DEP)
        assert result.terminate_calls == 0 and lab.registry.deployment(DEP).status == "destroyed"
