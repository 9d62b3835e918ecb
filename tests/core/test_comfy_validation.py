"""Graph validation against the recorded ComfyUI 0.8.0 catalog: every recorded answer of the real server, then a
table of graphs of our own, each with the answer read from ComfyUI's execution.py (validate_prompt /
validate_inputs) and comfy_execution/validation.py (validate_node_input)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from checkout import ROOT

from gpuharness.runtimes.comfyui.catalog import NodeCatalog
from gpuharness.runtimes.comfyui.problems import cause, problems
from gpuharness.runtimes.comfyui.validation import GraphError, graph_of, output_nodes, validate
from gpuharness.sim.comfyui import recorded_catalog

EXAMPLES = json.loads((ROOT / "fixtures" / "comfyui" / "examples.json").read_text())
CATALOG = recorded_catalog()


def test_every_recorded_answer_of_the_real_server_is_reproduced():
    assert len(EXAMPLES) >= 6
    for name, example in EXAMPLES.items():
        verdict = validate(example["graph"], CATALOG)
        body = example["prompt_body"]
        assert verdict.status == example["prompt_status"], name
        if verdict.accepted:
            assert verdict.node_errors == body["node_errors"], name
        else:
            assert verdict.body() == body, name


# --- graphs of our own ---------------------------------------------------------------------------------------

def empty_image(**overrides: Any) -> dict[str, Any]:
    return {"class_type": "EmptyImage", "inputs": {"width": 64, "height": 64, "batch_size": 1, "color": 0,
                                                   **overrides}}


def save(link: Any = ("1", 0), **extra: Any) -> dict[str, Any]:
    inputs: dict[str, Any] = {"filename_prefix": "t", **extra}
    if link is not None:
        inputs["images"] = list(link)
    return {"class_type": "SaveImage", "inputs": inputs}


def sdxl(ckpt: str = "sd15-corrupt.safetensors", **sampler: Any) -> dict[str, Any]:
    return {
        "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": ckpt}},
        "5": {"class_type": "EmptyLatentImage", "inputs": {"width": 512, "height": 512, "batch_size": 1}},
        "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "a cat", "clip": ["4", 1]}},
        "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "", "clip": ["4", 1]}},
        "3": {"class_type": "KSampler", "inputs": {"seed": 1, "steps": 1, "cfg": 7.0, "sampler_name": "euler",
                                                   "scheduler": "normal", "denoise": 1.0, "model": ["4", 0],
                                                   "positive": ["6", 0], "negative": ["7", 0],
                                                   "latent_image": ["5", 0], **sampler}},
        "8": {"class_type": "VAEDecode", "inputs": {"samples": ["3", 0], "vae": ["4", 2]}},
        "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0], "filename_prefix": "sdxl"}},
    }


def first_error(verdict: Any, node_id: str) -> dict[str, Any]:
    return verdict.node_errors[node_id]["errors"][0]


# (graph, expected status, expected top error type or None, {node: (error type, details)}, extra check)
CASES: dict[str, tuple[dict[str, Any], int, str | None, dict[str, tuple[str, str]]]] = {
    "unknown class, even unreachable, rejects the whole graph": (
        {"1": empty_image(), "2": save(), "5": {"class_type": "ReActorFaceSwap", "inputs": {}}},
        400, "invalid_prompt", {}),
    "a node without class_type": (
        {"1": empty_image(), "2": save(), "3": {"inputs": {}}}, 400, "invalid_prompt", {}),
    "a string beside the nodes (a _comment key)": (
        {"_comment": "exported by hand", "1": empty_image(), "2": save()}, 400, "invalid_prompt", {}),
    "no output node": ({"1": empty_image()}, 400, "prompt_no_outputs", {}),
    "required input missing": (
        {"1": empty_image(), "2": save(link=None)}, 400, "prompt_outputs_failed_validation",
        {"2": ("required_input_missing", "images")}),
    "a LATENT linked into an IMAGE input": (
        {"5": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
         "2": save(link=("5", 0))}, 400, "prompt_outputs_failed_validation",
        {"2": ("return_type_mismatch", "images, received_type(LATENT) mismatch input_type(IMAGE)")}),
    "a value not in a long list (the list is left out)": (
        sdxl(sampler_name="eulerx"), 400, "prompt_outputs_failed_validation",
        {"3": ("value_not_in_list", "sampler_name: 'eulerx' not in (list of length 44)")}),
    "a value not in a short list": (
        {"1": empty_image(), "3": {"class_type": "ImageScale", "inputs": {
            "image": ["1", 0], "upscale_method": "fancy", "width": 64, "height": 64, "crop": "disabled"}},
         "2": save(link=("3", 0))}, 400, "prompt_outputs_failed_validation",
        {"3": ("value_not_in_list", "upscale_method: 'fancy' not in ['nearest-exact', 'bilinear', 'area', "
                                    "'bicubic', 'lanczos']")}),
    "value below min": ({"1": empty_image(width=0), "2": save()}, 400, "prompt_outputs_failed_validation",
                        {"1": ("value_smaller_than_min", "width")}),
    "value above max": ({"1": empty_image(height=20000), "2": save()}, 400, "prompt_outputs_failed_validation",
                        {"1": ("value_bigger_than_max", "height")}),
    "a word where an INT goes": (
        {"1": empty_image(width="wide"), "2": save()}, 400, "prompt_outputs_failed_validation",
        {"1": ("invalid_input_type", "width, wide, invalid literal for int() with base 10: 'wide'")}),
    "a numeric string and a float are converted to INT": (
        {"1": empty_image(width="64", height=63.9), "2": save()}, 200, None, {}),
    "a word where a FLOAT goes": (
        sdxl(cfg="high"), 400, "prompt_outputs_failed_validation",
        {"3": ("invalid_input_type", "cfg, high, could not convert string to float: 'high'")}),
    "a null where an INT goes": (
        {"1": empty_image(color=None), "2": save()}, 400, "prompt_outputs_failed_validation",
        {"1": ("invalid_input_type", "color, None, int() argument must be a string, a bytes-like object or a "
                                     "real number, not 'NoneType'")}),
    "an output linked to a missing node": (
        {"1": empty_image(), "2": save(link=("99", 0))}, 400, "prompt_outputs_failed_validation",
        {"2": ("exception_during_validation", "'99'")}),
    "an inner node linked to a missing node": (
        {"8": {"class_type": "VAEDecode", "inputs": {"samples": ["99", 0], "vae": ["4", 2]}},
         "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd15-corrupt.safetensors"}},
         "9": save(link=("8", 0))}, 400, "prompt_outputs_failed_validation",
        {"8": ("exception_during_inner_validation", "'99'")}),
    "a link to an output index the node does not have": (
        {"1": empty_image(), "2": save(link=("1", 3))}, 400, "prompt_outputs_failed_validation",
        {"2": ("exception_during_validation", "tuple index out of range")}),
    "a link whose id is a number, not a string": (
        {"1": empty_image(), "2": save(link=(1, 0))}, 400, "prompt_outputs_failed_validation",
        {"2": ("exception_during_validation", "1")}),
    "a link of three elements": (
        {"1": empty_image(), "2": {"class_type": "SaveImage", "inputs": {"images": ["1", 0, 0],
                                                                          "filename_prefix": "t"}}},
        400, "prompt_outputs_failed_validation", {"2": ("bad_linked_input", "images")}),
    "an output node without inputs": (
        {"1": empty_image(), "2": {"class_type": "SaveImage"}}, 400, "prompt_outputs_failed_validation",
        {"2": ("exception_during_validation", "'inputs'")}),
    "an invalid node no output reaches is never validated": (
        {"1": empty_image(), "2": save(), "3": empty_image(width=0)}, 200, None, {}),
    "a {'__value__': ...} widget value is unwrapped": (
        {"1": empty_image(width={"__value__": 0}), "2": save()}, 400, "prompt_outputs_failed_validation",
        {"1": ("value_smaller_than_min", "width")}),
    "LoadImage checks its file itself": (
        {"1": {"class_type": "LoadImage", "inputs": {"image": "cat.png"}}, "2": save()}, 400,
        "prompt_outputs_failed_validation", {"1": ("custom_validation_failed", "image - Invalid image file: "
                                                                                 "cat.png")}),
    "LoadImage of an output file is not checked against the input folder": (
        {"1": {"class_type": "LoadImage", "inputs": {"image": "rec_00005_.png [output]"}}, "2": save()}, 200,
        None, {}),
    "a v3 COMBO value not in its options": (
        {"1": empty_image(), "2": {"class_type": "SaveAnimatedWEBP", "inputs": {
            "images": ["1", 0], "filename_prefix": "w", "fps": 6.0, "lossless": True, "quality": 80,
            "method": "best"}}}, 400, "prompt_outputs_failed_validation",
        {"2": ("value_not_in_list", "method: 'best' not in ['default', 'fastest', 'slowest']")}),
    "a wildcard input takes any type": (
        {"5": {"class_type": "EmptyLatentImage", "inputs": {"width": 64, "height": 64, "batch_size": 1}},
         "2": {"class_type": "PreviewAny", "inputs": {"source": ["5", 0]}}}, 200, None, {}),
    "an optional input is checked when given": (
        {"1": {"class_type": "CLIPLoader", "inputs": {"clip_name": "t5.safetensors", "type": "wan",
                                                      "device": "gpu"}},
         "2": {"class_type": "PreviewAny", "inputs": {"source": ["1", 0]}}}, 400, "prompt_outputs_failed_validation",
        {"1": ("value_not_in_list", "clip_name: 't5.safetensors' not in []")}),
    "a BOOLEAN takes any value (Python's bool())": (
        {"1": empty_image(), "2": {"class_type": "SaveAnimatedWEBP", "inputs": {
            "images": ["1", 0], "filename_prefix": "w", "fps": 6.0, "lossless": "no", "quality": 80,
            "method": "default"}}}, 200, None, {}),
    "two nodes that link each other": (
        {"1": {"class_type": "ImageInvert", "inputs": {"image": ["3", 0]}},
         "3": {"class_type": "ImageInvert", "inputs": {"image": ["1", 0]}}, "2": save()}, 400,
        "prompt_outputs_failed_validation", {}),
    "the missing checkpoint of the recorded example": (
        sdxl(ckpt="sd_xl_base_1.0.safetensors"), 400, "prompt_outputs_failed_validation",
        {"4": ("value_not_in_list", "ckpt_name: 'sd_xl_base_1.0.safetensors' not in "
                                    "['sd15-corrupt.safetensors', 'sd15-truncated.safetensors']")}),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_graph_gets_the_answer_comfyui_gives(name):
    graph, status, top, expected = CASES[name]
    verdict = validate(graph, CATALOG)
    assert verdict.status == status, verdict.to_json()
    assert (verdict.error or {}).get("type") == top, verdict.error
    for node_id, (kind, details) in expected.items():
        error = first_error(verdict, node_id)
        assert (error["type"], error["details"]) == (kind, details), error


def test_table_covers_every_error_type_of_the_server():
    seen = {first_error(validate(graph, CATALOG), node)["type"]
            for graph, _, _, expected in CASES.values() for node in expected}
    tops = {top for _, _, top, _ in CASES.values() if top}
    assert len(CASES) >= 25
    assert tops == {"invalid_prompt", "prompt_no_outputs", "prompt_outputs_failed_validation"}
    assert seen >= {"required_input_missing", "return_type_mismatch", "value_not_in_list", "value_smaller_than_min",
                    "value_bigger_than_max", "invalid_input_type", "exception_during_validation",
                    "exception_during_inner_validation", "bad_linked_input", "custom_validation_failed"}


def test_unknown_class_message_names_the_class_and_node():
    verdict = validate(CASES["unknown class, even unreachable, rejects the whole graph"][0], CATALOG)
    assert verdict.error == {"type": "invalid_prompt", "message": "Cannot execute because node ReActorFaceSwap does "
                             "not exist.", "details": "Node ID '#5'", "extra_info": {}}


def test_min_error_carries_the_message_the_config_and_the_converted_value():
    error = first_error(validate({"1": empty_image(width="0"), "2": save()}, CATALOG), "1")
    assert error["message"] == "Value 0 smaller than min of 1"
    assert error["extra_info"]["received_value"] == 0  # converted before the comparison
    assert error["extra_info"]["input_config"][0] == "INT"


def test_inner_exception_is_reported_on_the_linked_node_with_the_linking_input():
    verdict = validate(CASES["an inner node linked to a missing node"][0], CATALOG)
    error = first_error(verdict, "8")
    assert error["extra_info"]["input_name"] == "images" and error["extra_info"]["linked_node"] == ["8", 0]
    assert verdict.node_errors["8"]["class_type"] == "VAEDecode"
    assert verdict.error is not None and verdict.error["details"] == ""  # the output's own reasons: none


def test_a_graph_with_one_good_output_is_accepted_and_reports_the_failed_one():
    graph = {"1": empty_image(), "2": save(), "3": empty_image(width=0), "4": save(link=("3", 0))}
    verdict = validate(graph, CATALOG)
    assert verdict.accepted and verdict.good_outputs == ("2",)
    assert verdict.node_errors["3"]["dependent_outputs"] == ["4"]


def test_dependent_outputs_lists_every_output_that_needs_the_failing_node():
    graph = sdxl(ckpt="missing.safetensors")
    graph["10"] = {"class_type": "PreviewImage", "inputs": {"images": ["8", 0]}}
    verdict = validate(graph, CATALOG)
    assert verdict.node_errors["4"]["dependent_outputs"] == ["9", "10"]


def test_partial_execution_targets_leave_other_outputs_out():
    graph = {"1": empty_image(), "2": save(), "3": empty_image(width=0), "4": save(link=("3", 0))}
    assert validate(graph, CATALOG, targets=["2"]).node_errors == {}
    assert validate(graph, CATALOG, targets=["1"]).error["type"] == "prompt_no_outputs"  # type: ignore[index]


def test_a_post_prompt_body_is_unwrapped_and_a_ui_workflow_is_refused():
    assert graph_of({"prompt": {"1": empty_image()}, "client_id": "x"}) == {"1": empty_image()}
    with pytest.raises(GraphError, match="UI-format"):
        graph_of({"nodes": [], "links": [], "version": 0.4})
    with pytest.raises(GraphError, match="got list"):
        graph_of([1, 2])


def test_a_model_the_server_has_is_accepted_once_the_catalog_lists_it():
    graph = sdxl(ckpt="sd_xl_base_1.0.safetensors")
    assert not validate(graph, CATALOG).accepted
    assert validate(graph, CATALOG.with_model_files({"checkpoints": ["sd_xl_base_1.0.safetensors"]})).accepted


def test_output_nodes_are_found_from_the_catalog():
    assert output_nodes(sdxl(), CATALOG) == ["9"]


# --- what a rejection means -----------------------------------------------------------------------------------

def test_missing_model_is_model_missing_naming_the_file_and_what_the_server_has():
    found = problems(validate(sdxl(ckpt="sd_xl_base_1.0.safetensors"), CATALOG).body(), CATALOG)
    assert cause(found) == "model_missing"
    assert found[0].missing == "sd_xl_base_1.0.safetensors"
    assert "sd15-corrupt.safetensors" in found[0].what and "models/checkpoints/" in found[0].remedy
    assert found[0].line().startswith("node 4 (CheckpointLoaderSimple), input ckpt_name:")


def test_unknown_class_is_custom_node_missing_in_both_server_shapes():
    recorded = EXAMPLES["unknown_node_type"]["prompt_body"]
    older = {"error": {"type": "missing_node_type", "message": "Node 'ReActor' not found. The custom node may not "
                       "be installed.", "details": "Node ID '#3'", "extra_info": {
                           "node_id": "3", "class_type": "ReActorFaceSwap", "node_title": "ReActor"}},
             "node_errors": {}}
    for body in (recorded, older):
        [problem] = problems(body)
        assert (problem.cause, problem.missing, problem.node_id) == ("custom_node_missing", "ReActorFaceSwap", "3")


def test_each_problem_says_what_to_do():
    for name, (graph, status, _, _) in CASES.items():
        if status == 200:
            continue
        found = problems(validate(graph, CATALOG).body(), CATALOG)
        assert found, name
        assert all(p.remedy and p.what for p in found), name


def test_catalog_refuses_a_document_that_is_not_object_info(tmp_path):
    from gpuharness.core.errors import UserError

    bad = tmp_path / "object_info.json"
    bad.write_text(json.dumps({"KSampler": "oops"}))
    with pytest.raises(UserError, match=r"object_info\.json: class 'KSampler'"):
        NodeCatalog.load(bad)
