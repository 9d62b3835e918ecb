"""A workflow declares its inputs: `run` refuses unknown names before submitting (nothing billed, the deployment
left ready), and a runtime's refusal of an input is `bad_input`, never retried (issue 20, item 7)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuharness.core.ledger import Ledger
from gpuharness.demo.simulated_estate import MODEL, WORKFLOW, SimulatedEstate
from gpuharness.operations.install import configure, install
from gpuharness.operations.job_inputs import declared_inputs
from gpuharness.operations.provision import ProvisionRequest, provision
from gpuharness.sim.examples import workflow_entry

DEP = "dep_inputs_01"


@pytest.fixture
def lab(tmp_path):
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        provision(lab.ctx, ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.35,
                                            runtime="comfyui", model=MODEL, workflow=WORKFLOW, idle_minutes=15,
                                            deployment_id=DEP), up_deadline_s=30, poll_s=0.1)
        install(lab.ctx, DEP, deadline_s=60)
        configure(lab.ctx, DEP, deadline_s=60)
        from gpuharness.core.lifecycle import transition  # stands in for a passing health run
        transition(lab.registry, DEP, "ready", ready_at=lab.registry.deployment(DEP).created_at,
                   health={"status": "passed"})
        yield lab


def run(lab, inputs: str):
    return lab.cli("run", DEP, "--inputs", inputs, "--poll", "0.05", "--registry", str(lab.registry.root))


def test_held_out_a_typo_in_the_inputs_is_refused_before_submitting(lab):
    """The README's old lifecycle: `run ... --inputs '{"prompt": "a cat"}'` on a workflow with no `prompt`."""
    journal = lab.registry.journal_path.read_bytes()
    result = run(lab, '{"prompt": "a cat"}')
    assert result.returncode == 2, result.stdout + result.stderr
    errors = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(errors) == 1, result.stderr
    assert "workflows.json" in errors[0] and "'prompt'" in errors[0] and "text" in errors[0], errors[0]
    assert not list(Ledger(lab.registry.ledger_path).records())
    assert lab.registry.deployment(DEP).status == "ready"
    assert lab.registry.journal_path.read_bytes() == journal


def test_a_batch_is_checked_whole_before_its_first_job(lab):
    result = lab.cli("run", DEP, "--inputs", '{"text": "a cat"}', "--inputs", '{"txt": "a dog"}',
                     "--registry", str(lab.registry.root))
    assert result.returncode == 2 and "'txt'" in result.stderr, result.stderr
    assert not list(Ledger(lab.registry.ledger_path).records())


def test_declared_inputs_come_from_the_graph_parameters_and_test_generation():
    workflow = workflow_entry()
    known = declared_inputs(workflow, "comfyui")
    assert known is not None and "text" in known and "seed" in known and "prompt" not in known
    assert declared_inputs({**workflow, "inputs": ["prompt"]}, "comfyui") == ("prompt",)
    assert declared_inputs({**workflow, "runtime": "openai"}, "openai") is None


def test_an_explicit_declaration_is_the_contract(lab):
    with lab.registry.update("workflows.json") as doc:
        doc["workflows"][0]["inputs"] = ["text"]
    refused = run(lab, '{"seed": 3}')
    assert refused.returncode == 2 and "its inputs: text" in refused.stderr, refused.stderr
    payload = json.loads(lab.cli("run", DEP, "--inputs", '{"text": "a cat"}', "--json", "--poll", "0.05",
                                 "--registry", str(lab.registry.root)).stdout)
    assert payload[0]["status"] == "completed"


def failed_jobs(lab):
    return [r for r in Ledger(lab.registry.ledger_path).records() if r["status"] == "failed"]


def test_a_declared_input_the_graph_lacks_is_bad_input_once_and_the_deployment_stays_ready(lab):
    with lab.registry.update("workflows.json") as doc:
        doc["workflows"][0]["inputs"] = ["text", "prompt"]  # declared, but no graph input takes it
    result = run(lab, '{"prompt": "a cat"}')
    assert result.returncode == 1, result.stderr
    [failed] = failed_jobs(lab)
    assert failed["cause"] == "bad_input" and "not retried" in result.stderr, result.stderr
    assert lab.registry.deployment(DEP).status == "ready"


def test_a_value_comfyui_refuses_is_bad_input_never_retried(lab):
    result = run(lab, '{"3.sampler_name": "no_such_sampler"}')
    assert result.returncode == 1, result.stderr
    [failed] = failed_jobs(lab)
    assert failed["cause"] == "bad_input", failed["error"]
    assert lab.registry.deployment(DEP).status == "ready"


@given(st.text(min_size=1, max_size=20))
def test_any_name_is_either_declared_addressed_or_refused_in_one_line(name):
    from gpuharness.core.errors import UserError
    from gpuharness.operations.job_inputs import check_inputs
    workflow = workflow_entry()
    known = declared_inputs(workflow, "comfyui") or ()
    node_id, dot, _ = name.partition(".")
    addressed = name in workflow["graph"] or bool(dot and node_id in workflow["graph"])
    try:
        check_inputs(workflow, "comfyui", {name: "x"}, "workflows.json")
    except UserError as exc:
        assert name not in known and not addressed
        assert "\n" not in exc.line() and "its inputs: " in exc.line()
    else:
        assert name in known or addressed
