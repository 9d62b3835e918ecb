"""`gpuharness workflow check|add|show|list` as real subprocesses: exit 0 accepted, 1 rejected, 2 bad input; a
line per problem with its cause; --server reads a running (simulated) ComfyUI's catalog over loopback HTTP."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from checkout import ROOT
from health_world import CHECKPOINT, sdxl_graph

from gpuharness.core.registry import Registry
from gpuharness.sim.comfyui import RECORDED_CATALOG, safetensors_bytes
from gpuharness.sim.runtimes import RuntimeServer

EXAMPLES = json.loads((ROOT / "fixtures" / "comfyui" / "examples.json").read_text())


def gpuharness(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gpuharness", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd)


@pytest.fixture
def graph_file(tmp_path):
    def write(graph, name="graph.json"):
        path = tmp_path / name
        path.write_text(json.dumps(graph))
        return str(path)
    return write


def test_check_accepts_a_valid_graph_with_exit_0(graph_file):
    done = gpuharness("workflow", "check", graph_file(EXAMPLES["success_empty_image"]["graph"]),
                      "--catalog", str(RECORDED_CATALOG))
    assert done.returncode == 0, done.stderr
    assert "accepted" in done.stdout and "outputs 2" in done.stdout


def test_check_rejects_with_exit_1_and_one_line_per_problem_naming_the_cause(graph_file):
    done = gpuharness("workflow", "check", graph_file(sdxl_graph(ckpt="sd_xl_base_1.0.safetensors")),
                      "--catalog", str(RECORDED_CATALOG))
    assert done.returncode == 1
    first, problem = done.stdout.splitlines()[:2]
    assert "rejected (model_missing)" in first
    assert problem.strip().startswith("node 4 (CheckpointLoaderSimple), input ckpt_name:")
    assert "sd_xl_base_1.0.safetensors" in problem and "sd15-corrupt.safetensors" in problem


def test_check_json_is_the_servers_verdict(graph_file):
    example = EXAMPLES["missing_required_input"]
    done = gpuharness("workflow", "check", graph_file(example["graph"]), "--catalog", str(RECORDED_CATALOG), "--json")
    assert done.returncode == 1
    payload = json.loads(done.stdout)
    assert payload == {"accepted": False, **example["prompt_body"]}


def test_unknown_class_is_custom_node_missing_naming_the_class(graph_file):
    done = gpuharness("workflow", "check", graph_file(EXAMPLES["unknown_node_type"]["graph"]),
                      "--catalog", str(RECORDED_CATALOG))
    assert done.returncode == 1 and "custom_node_missing" in done.stdout and "ReActorFaceSwap" in done.stdout


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    ('{"nodes": [], "links": [], "version": 0.4}', "UI-format workflow"),
    ("[1, 2]", "not an API-format graph"),
])
def test_check_bad_input_is_one_line_and_exit_2(tmp_path, content, message):
    path = tmp_path / "in.json"
    path.write_text(content)
    done = gpuharness("workflow", "check", str(path), "--catalog", str(RECORDED_CATALOG))
    assert done.returncode == 2 and message in done.stderr and str(path) in done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_check_needs_a_catalog_and_a_readable_one(graph_file, tmp_path):
    graph = graph_file(sdxl_graph())
    assert gpuharness("workflow", "check", graph).returncode == 2
    missing = gpuharness("workflow", "check", graph, "--catalog", str(tmp_path / "none.json"))
    assert missing.returncode == 2 and "cannot read the catalog" in missing.stderr


def test_check_against_a_running_server_reads_its_catalog(tmp_path, graph_file):
    models = tmp_path / "models" / "checkpoints"
    models.mkdir(parents=True)
    (models / CHECKPOINT).write_bytes(safetensors_bytes())
    server = RuntimeServer("comfyui", models_root=tmp_path / "models").start()
    try:
        accepted = gpuharness("workflow", "check", graph_file(sdxl_graph()), "--server", server.url)
        rejected = gpuharness("workflow", "check", graph_file(sdxl_graph(ckpt="other.safetensors"), "b.json"),
                              "--server", server.url)
    finally:
        server.stop()
    assert accepted.returncode == 0, accepted.stdout + accepted.stderr
    assert rejected.returncode == 1 and f"(it has: {CHECKPOINT})" in rejected.stdout
    down = gpuharness("workflow", "check", graph_file(sdxl_graph()), "--server", "http://127.0.0.1:9")
    assert down.returncode == 2 and "cannot read the catalog" in down.stderr


def test_add_writes_a_workflow_with_expected_outputs_and_show_and_list_read_it(tmp_path, graph_file):
    registry = tmp_path / "reg"
    assert gpuharness("init", "--registry", str(registry)).returncode == 0
    graph = graph_file(sdxl_graph())
    done = gpuharness("workflow", "add", "--from", graph, "--id", "sdxl-t2i", "--runtime", "comfyui", "--model",
                      "sdxl-base-1.0", "--min-bytes", "100000", "--registry", str(registry))
    assert done.returncode == 0, done.stderr
    [workflow] = Registry(registry).items("workflows.json")
    assert workflow["version"] == 1 and workflow["graph"] == sdxl_graph()
    assert workflow["test_generation"] == {"expected_outputs": [{"type": "image/png", "min_bytes": 100000}],
                                           "timeout_s": 300.0}
    again = gpuharness("workflow", "add", "--from", graph, "--id", "sdxl-t2i", "--registry", str(registry))
    assert again.returncode == 0 and "version 2" in again.stdout
    shown = gpuharness("workflow", "show", "sdxl-t2i", "--registry", str(registry))
    assert "version 2" in shown.stdout and CHECKPOINT in shown.stdout
    listed = gpuharness("workflow", "list", "--registry", str(registry))
    assert listed.stdout.count("sdxl-t2i") == 2
    checked = gpuharness("workflow", "check", "--workflow", "sdxl-t2i", "--catalog", str(RECORDED_CATALOG),
                         "--registry", str(registry))
    assert checked.returncode == 1 and "model_missing" in checked.stdout


def test_add_refuses_a_graph_the_catalog_rejects_unless_forced(tmp_path, graph_file):
    registry = tmp_path / "reg"
    gpuharness("init", "--registry", str(registry))
    graph = graph_file(EXAMPLES["missing_required_input"]["graph"])
    refused = gpuharness("workflow", "add", "--from", graph, "--id", "bad", "--catalog", str(RECORDED_CATALOG),
                         "--registry", str(registry))
    assert refused.returncode == 1 and "required input images is missing" in refused.stdout
    assert Registry(registry).items("workflows.json") == []
    forced = gpuharness("workflow", "add", "--from", graph, "--id", "bad", "--catalog", str(RECORDED_CATALOG),
                        "--force", "--registry", str(registry))
    assert forced.returncode == 0


def test_add_needs_an_output_node(tmp_path, graph_file):
    registry = tmp_path / "reg"
    gpuharness("init", "--registry", str(registry))
    done = gpuharness("workflow", "add", "--from", graph_file({"1": EXAMPLES["success_empty_image"]["graph"]["1"]}),
                      "--id", "x", "--registry", str(registry))
    assert done.returncode == 2 and "prompt_no_outputs" in done.stderr


def test_schema_accepts_a_comfyui_graph_without_inputs_and_names_a_bad_field(tmp_path):
    registry = Registry(tmp_path / "reg")
    registry.init()
    with registry.update("workflows.json") as doc:
        doc["workflows"].append({"id": "w", "version": 1, "runtime": "comfyui", "graph": sdxl_graph(),
                                 "test_generation": {"timeout_s": 60}})
    (tmp_path / "reg" / "workflows.json").write_text(json.dumps({"schema_version": 1, "workflows": [
        {"id": "w", "version": 1, "runtime": "openai", "test_generation": {"timeout_s": 60}}]}))
    done = gpuharness("workflow", "list", "--registry", str(tmp_path / "reg"))
    assert done.returncode == 2 and "workflows.json" in done.stderr and "inputs" in done.stderr
