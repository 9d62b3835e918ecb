"""The log tail is judged by what the workflow needs: a line that a working server can carry (an optional node module
that failed to import, another prompt's missing node, model or input) fails only when the workflow needs what the
server's catalog lacks, and is otherwise a warning; OOM, driver, corrupt weights and a full disk always fail. Real
startup logs (fixtures/logs, SOURCES.md) judged against the recorded ComfyUI 0.8.0 catalog."""

from __future__ import annotations

import pytest
from checkout import ROOT
from health_world import CHECKPOINT, WITH_AUDIO, WORKFLOW, sdxl_graph

from gpuharness import probe
from gpuharness.health import rules
from gpuharness.probe import framing
from gpuharness.runtimes.comfyui import workflow_fit
from gpuharness.sim.comfyui import recorded_catalog

LOGS = ROOT / "fixtures" / "logs"
SERVER = recorded_catalog().with_model_files({"checkpoints": [CHECKPOINT]})


def tail_of(*lines: str) -> probe.ProbeResult:
    nonce = framing.new_nonce()
    log = framing.Frame("log", 0, "".join(f"{line}\n" for line in lines).encode())
    return probe.parse(framing.encode(nonce, [log], done=False), nonce=nonce)


def log(name: str) -> probe.ProbeResult:
    return tail_of(*(LOGS / name).read_text().splitlines()[-200:])


def fits(workflow) -> workflow_fit.WorkflowFit:
    return workflow_fit.fit(workflow["test_generation"]["graph"], SERVER)


def test_a_healthy_server_that_could_not_import_an_optional_module_passes_with_a_warning():
    verdict = rules.log_tail_clean(log("comfyui-rocm-optional-torchaudio.log"), "comfyui.log", fits(WORKFLOW))
    assert verdict.ok and not verdict.skip
    assert len(verdict.warnings) == 1 and "line 29: Cannot import /workspace/ComfyUI/comfy_extras/nodes_audio.py" \
        in verdict.warnings[0] and "harmless to this workflow" in verdict.warnings[0]


def test_the_same_log_fails_when_the_workflow_needs_a_class_the_server_lacks():
    verdict = rules.log_tail_clean(log("comfyui-rocm-optional-torchaudio.log"), "comfyui.log", fits(WITH_AUDIO))
    assert (verdict.ok, verdict.cause) == (False, "custom_node_missing")
    assert "the workflow needs EmptyLatentAudio, VAEDecodeAudio, SaveAudio, which the server lacks" in verdict.message
    assert "nodes_audio.py" in verdict.message and "install its requirements" in verdict.message


def test_without_a_catalog_an_import_failure_is_a_warning_and_the_test_generation_decides():
    verdict = rules.log_tail_clean(log("comfyui-cannot-import-maskgct.log"), "comfyui.log",
                                   workflow_fit.not_judged("dep.json holds no server catalog"))
    assert verdict.ok and "not judged against the workflow (dep.json holds no server catalog)" in verdict.warnings[0]


@pytest.mark.parametrize("name", ["comfyui-oom-allocation-on-device.log", "comfyui-no-kernel-image-rtx50.log",
                                  "comfyui-headertoolarge-colab.log", "diffusers-no-space-left.log"])
def test_oom_driver_corrupt_weights_and_a_full_disk_always_fail(name):
    verdict = rules.log_tail_clean(log(name), "comfyui.log", fits(WORKFLOW))
    assert not verdict.ok and verdict.cause in {"cuda_oom", "driver_mismatch", "weights_corrupt", "disk_full"}


def test_a_weak_oom_line_beside_a_strong_import_failure_still_fails():
    facts = tail_of("Cannot import /ComfyUI/custom_nodes/x module for custom nodes: No module named 'y'",
                    "torch.OutOfMemoryError: the sampler ran out")
    verdict = rules.log_tail_clean(facts, "comfyui.log", fits(WORKFLOW))
    assert (verdict.ok, verdict.cause) == (False, "cuda_oom")


def test_another_prompts_missing_model_is_a_warning_unless_the_workflow_needs_the_file():
    facts = log("comfyui-value-not-in-list-stablegen.log")
    fine = rules.log_tail_clean(facts, "comfyui.log", fits(WORKFLOW))
    assert fine.ok and "[model_missing]" in fine.warnings[0]
    graph = sdxl_graph(ckpt="elsewhere.safetensors")
    lacking = {**WORKFLOW, "test_generation": {**WORKFLOW["test_generation"], "graph": graph}}
    refused = rules.log_tail_clean(facts, "comfyui.log", fits(lacking))
    assert (refused.ok, refused.cause) == (False, "model_missing")
    assert "the workflow needs elsewhere.safetensors, which the server lacks" in refused.message


def test_a_bad_input_of_another_prompt_is_a_warning():
    verdict = rules.log_tail_clean(log("comfyui-tooling-unidentified-image.log"), "comfyui.log", fits(WORKFLOW))
    assert verdict.ok and any("[bad_input]" in warning for warning in verdict.warnings)


def test_a_non_comfyui_server_is_judged_as_before():
    verdict = rules.log_tail_clean(log("comfyui-cannot-import-maskgct.log"), "server.log", None)
    assert (verdict.ok, verdict.cause) == (False, "custom_node_import")
