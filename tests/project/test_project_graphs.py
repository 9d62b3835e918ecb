"""The project's own ComfyUI graphs are valid: the demo's, every fixture workflow's and the README's pass
`workflow check` against the recorded real ComfyUI 0.8.0 catalog, listing the model files their models.json
installs (where ComfyUI lists them: models/<folder>/<file>)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from typing import Any

import pytest
from checkout import ROOT
from health_world import CUSTOM_SAMPLER, MODEL, WORKFLOW

from gpuharness.core.registry import Registry
from gpuharness.demo.simulated_estate import GRAPH, seed
from gpuharness.runtimes.comfyui.catalog import NodeCatalog
from gpuharness.runtimes.comfyui.client import build_test_graph, job_graph
from gpuharness.runtimes.comfyui.validation import validate
from gpuharness.sim.comfyui import recorded_catalog, with_custom_node

FIXTURE_REGISTRIES = [ROOT / "fixtures" / "demo" / ".pi" / "gpu", ROOT / "fixtures" / "health" / ".pi" / "gpu"]


def catalog_for(models: list[dict[str, Any]], base: NodeCatalog | None = None) -> NodeCatalog:
    """The recorded catalog listing the files these models install, each in its ComfyUI folder."""
    files: dict[str, list[str]] = defaultdict(list)
    for model in models:
        for item in model.get("files", []):
            folder, _, name = str(item["path"]).removeprefix("models/").partition("/")
            files[folder].append(name)
    return (base or recorded_catalog()).with_model_files(files)


def assert_accepted(graph: dict[str, Any], catalog: NodeCatalog, where: str) -> None:
    verdict = validate(graph, catalog)
    assert verdict.accepted and not verdict.node_errors, f"{where}: {json.dumps(verdict.to_json())[:1500]}"


def comfy_workflows(registry: Registry) -> list[dict[str, Any]]:
    return [w for w in registry.items("workflows.json") if w["runtime"] == "comfyui"]


def test_the_demo_graph_and_its_jobs_are_valid(tmp_path):
    registry = Registry(tmp_path / ".pi" / "gpu")
    seed(registry, tmp_path, {"vast": "http://127.0.0.1:1", "runpod": "http://127.0.0.1:2"})
    catalog = catalog_for(registry.items("models.json"))
    [workflow] = comfy_workflows(registry)
    assert workflow["graph"] is GRAPH or workflow["graph"] == GRAPH
    assert_accepted(build_test_graph(workflow), catalog, "demo test generation")
    assert_accepted(job_graph(workflow, {"text": "a lighthouse at dusk"}), catalog, "demo job")


@pytest.mark.parametrize("root", FIXTURE_REGISTRIES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fixture_workflow_is_valid(root):
    registry = Registry(root)
    catalog = catalog_for(registry.items("models.json"))
    workflows = comfy_workflows(registry)
    assert workflows
    for workflow in workflows:
        assert_accepted(build_test_graph(workflow), catalog, f"{root}:{workflow['id']}")


def test_the_test_worlds_workflows_are_valid():
    catalog = catalog_for([MODEL])
    assert_accepted(build_test_graph(WORKFLOW), catalog, WORKFLOW["id"])
    assert_accepted(build_test_graph(CUSTOM_SAMPLER), catalog_for([MODEL], with_custom_node(recorded_catalog())),
                    CUSTOM_SAMPLER["id"])


def readme_graphs() -> list[dict[str, Any]]:
    text = (ROOT / "docs" / "workflows.md").read_text(encoding="utf-8")
    section = text
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", section, re.S)]
    return [b for b in blocks if isinstance(b, dict) and b and all(isinstance(n, dict) and "class_type" in n
                                                                    for n in b.values())]


def test_the_readme_graphs_are_valid():
    graphs = readme_graphs()
    assert graphs, "docs/workflows.md shows a graph"
    catalog = recorded_catalog().with_model_files({"checkpoints": ["sd_xl_base_1.0.safetensors"]})
    for graph in graphs:
        assert_accepted(graph, catalog, "docs/workflows.md")


def test_the_graph_the_demo_used_to_send_is_refused_as_the_real_server_refused_it():
    old = {"3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 4, "cfg": 1.0}},
           "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a red cube"}},
           "9": {"class_type": "SaveImage", "inputs": {"filename_prefix": "h3", "images": ["3", 0]}}}
    verdict = validate(old, recorded_catalog())
    assert not verdict.accepted
    assert verdict.node_errors["9"]["errors"][0]["details"] == ("images, received_type(LATENT) mismatch "
                                                                "input_type(IMAGE)")


def test_workflow_check_cli_accepts_the_demo_workflow_and_exits_1_on_a_rejected_one(tmp_path):
    registry = Registry(tmp_path / "reg")
    seed(registry, tmp_path, {"vast": "http://127.0.0.1:1", "runpod": "http://127.0.0.1:2"})
    catalog = tmp_path / "object_info.json"
    catalog.write_text(json.dumps(catalog_for(registry.items("models.json")).document))
    done = subprocess.run([sys.executable, "-m", "gpuharness", "workflow", "check", "--workflow", "h3-text-to-image",
                           "--catalog", str(catalog), "--registry", str(registry.root)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "accepted" in done.stdout, done.stdout + done.stderr
    recorded = ROOT / "src" / "gpuharness" / "sim" / "comfyui-0.8.0-object_info.json"
    done = subprocess.run([sys.executable, "-m", "gpuharness", "workflow", "check", "--workflow", "h3-text-to-image",
                           "--catalog", str(recorded), "--registry", str(registry.root)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "[model_missing]" in done.stdout and "h3-mini.safetensors" in done.stdout
