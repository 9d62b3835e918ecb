"""Failure classification: the real-log corpus, the decisive line in long logs, and the must-not-confuse cases."""

from __future__ import annotations

import json
import re
import tracemalloc
from collections.abc import Iterator

import pytest
from checkout import ROOT

from gpuharness.diagnose.diagnosis import _RULES, CAUSES, REMEDIES, classify_file, classify_lines, classify_text

LOGS = ROOT / "fixtures" / "logs"

# file -> (cause, symptom, decisive 1-based line number); sources in fixtures/logs/SOURCES.md
CORPUS: dict[str, tuple[str, str | None, int | None]] = {
    "comfyui-oom-allocation-on-device.log": ("cuda_oom", None, 6),
    "comfyui-oom-hunyuan-fp8.log": ("cuda_oom", None, 7),
    "comfyui-hip-oom-rocm.log": ("cuda_oom", None, 4),
    "vllm-oom-engine.log": ("cuda_oom", None, 14),
    "vllm-oom-ray-worker.log": ("cuda_oom", None, 8),
    "vllm-oom-old-torch.log": ("cuda_oom", None, 6),
    "comfyui-history-execution-error-oom.json": ("cuda_oom", None, 54),
    "runpod-serverless-oom-status.json": ("cuda_oom", None, 6),
    "fooocus-driver-too-old.log": ("driver_mismatch", None, 11),
    "fastfcn-driver-too-old-assertion.log": ("driver_mismatch", None, 13),
    "comfyui-no-kernel-image-rtx50.log": ("driver_mismatch", None, 10),
    "llamacpp-insufficient-driver.log": ("driver_mismatch", None, 3),
    "faster-whisper-insufficient-driver.log": ("driver_mismatch", None, 8),
    "tgi-runpod-unsatisfied-cuda.log": ("driver_mismatch", None, 9),
    "comfyui-cannot-import-maskgct.log": ("custom_node_import", None, 9),
    "comfyui-cannot-import-sc-node.log": ("custom_node_import", None, 15),
    "comfyui-import-failed-primere.log": ("custom_node_import", None, 14),
    "comfyui-impact-pack-comfy-execution.log": ("custom_node_import", None, 10),
    "comfyui-rocm-optional-torchaudio.log": ("custom_node_import", None, 29),
    "comfyui-missing-node-type.json": ("custom_node_missing", None, 1),
    "comfyui-invalid-prompt-etn-node.log": ("custom_node_missing", None, 3),
    "comfyui-invalid-prompt-instantid.log": ("custom_node_missing", None, 5),
    "comfyui-cogvideox-node-removed.log": ("custom_node_missing", None, 5),
    "comfyui-value-not-in-list-stabilitymatrix.log": ("model_missing", None, 4),
    "comfyui-value-not-in-list-stablegen.log": ("model_missing", None, 4),
    "comfyui-wan-loaders-not-in-list.log": ("model_missing", None, 3),
    "comfyui-tooling-unidentified-image.log": ("bad_input", None, 9),
    "comfyroll-xy-ds-store.log": ("bad_input", None, 4),
    "comfyui-loadimage-validation.json": ("bad_input", None, 1),
    "comfyui-headertoolarge-colab.log": ("weights_corrupt", None, 18),
    "comfyui-metadataincomplete-face-parsing.log": ("weights_corrupt", None, 3),
    "runpod-hidream-metadataincomplete.log": ("weights_corrupt", None, 16),
    "mineru-hf-consistency-check.log": ("weights_corrupt", None, 4),
    "diffusers-no-space-left.log": ("disk_full", None, 10),
    "sagemaker-no-space-left.log": ("disk_full", None, 2),
    "llamafactory-safetensors-storagefull.log": ("disk_full", None, 7),
    "comfyui-host-oom-killed.log": ("unknown", "host_oom_kill", 10),
    "dmesg-host-oom-kill.log": ("unknown", "host_oom_kill", 1),
    "vllm-illegal-memory-access.log": ("unknown", "illegal_memory_access", 2),
    "nanogpt-device-side-assert.log": ("unknown", "cuda_error", 8),
    "comfyui-clean-run.log": ("unknown", None, None),
}


def test_every_corpus_file_has_an_expectation_and_a_source():
    files = {p.name for p in LOGS.iterdir() if p.name != "SOURCES.md"}
    assert files == set(CORPUS), "add the new corpus file to CORPUS (and SOURCES.md)"
    sources = (LOGS / "SOURCES.md").read_text()
    missing = [name for name in CORPUS if name not in sources]
    assert not missing, f"no source recorded in fixtures/logs/SOURCES.md for {missing}"


def test_corpus_has_at_least_three_real_logs_per_cause():
    for cause in CAUSES:
        if cause == "unknown":
            continue
        count = sum(1 for expected, _, _ in CORPUS.values() if expected == cause)
        assert count >= 3, f"{cause}: only {count} corpus logs"


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_corpus_log_classifies_to_expected_cause_and_decisive_line(name):
    cause, symptom, line_no = CORPUS[name]
    path = LOGS / name
    diagnosis = classify_file(path)
    assert (diagnosis.cause, diagnosis.symptom, diagnosis.line_no) == (cause, symptom, line_no), diagnosis.explain()
    if line_no is not None and path.suffix == ".log":
        actual = path.read_text(encoding="utf-8").splitlines()[line_no - 1].strip()
        assert diagnosis.line is not None and diagnosis.line[:200] == actual[:200]


def test_decisive_line_is_found_buried_in_a_long_log(tmp_path):
    noise = "".join(f"[2024-11-06 23:41:{i % 60:02d}] {i % 20}/20 [00:0{i % 9}<00:01,  5.62it/s] step ok\n"
                    for i in range(200_000))
    oom = (LOGS / "vllm-oom-engine.log").read_text()
    log = tmp_path / "long.log"
    log.write_text(noise + oom + noise[:100_000])
    diagnosis = classify_file(log)
    assert diagnosis.cause == "cuda_oom"
    assert diagnosis.line_no == 200_000 + 14
    assert diagnosis.lines_read > 200_014


def test_classify_lines_streams_with_bounded_memory():
    def lines() -> Iterator[str]:
        for i in range(150_000):
            yield f"INFO 12-16 21:39:{i % 60:02d} metrics.py:351] Avg prompt throughput: {i} tokens/s\n"
        yield "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB.\n"

    tracemalloc.start()
    diagnosis = classify_lines(lines())
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert diagnosis.cause == "cuda_oom" and diagnosis.line_no == 150_001
    assert peak < 2_000_000, f"classify_lines held {peak} bytes: it must not materialise the log"


def test_oom_text_at_the_end_of_a_huge_progress_bar_line_is_seen():
    line = "\r".join(f"{i}%|####| {i}/100" for i in range(100_000)) + "\rRuntimeError: CUDA error: out of memory"
    assert classify_lines([line]).cause == "cuda_oom"


@pytest.mark.parametrize("line", [
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 23.57 GiB",
    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 23.69 GiB total capacity)",
    "RuntimeError: CUDA error: out of memory",
    "RuntimeError: CUDA driver error: out of memory",
    "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510",
    "torch.OutOfMemoryError: Allocation on device",
    "HIP out of memory. Tried to allocate 16.00 MiB.",
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: ... CUDA_ERROR_OUT_OF_MEMORY: out of memory",
    "ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization`",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
])
def test_gpu_out_of_memory_variants_are_cuda_oom(line):
    diagnosis = classify_text(f"starting\n{line}\n")
    assert diagnosis.cause == "cuda_oom" and diagnosis.line_no == 2


@pytest.mark.parametrize(("line", "symptom"), [
    ("Killed", "host_oom_kill"),
    ("./start.sh: line 7:  4242 Killed                  python main.py --listen", "host_oom_kill"),
    ("[ 4018.45] Out of memory: Killed process 935 (python) total-vm:113656kB, anon-rss:102104kB", "host_oom_kill"),
    ("Memory cgroup out of memory: Killed process 1234 (python3)", "host_oom_kill"),
    ("python3 invoked oom-killer: gfp_mask=0x6200ca(GFP_HIGHUSER_MOVABLE), order=0", "host_oom_kill"),
    ("Reason: OOMKilled", "host_oom_kill"),
    ("RuntimeError: [enforce fail at alloc_cpu.cpp:114] . DefaultCPUAllocator: not enough memory: you tried to "
     "allocate 7516192768 bytes.", "host_oom_kill"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "illegal_memory_access"),
    ("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered", "illegal_memory_access"),
    ("RuntimeError: CUDA error: misaligned address", "cuda_error"),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(...)`", "cuda_error"),
    ("RuntimeError: CUDA error: unspecified launch failure", "cuda_error"),
    ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "cuda_error"),
])
def test_host_oom_kill_illegal_access_and_other_cuda_errors_are_never_cuda_oom(line, symptom):
    diagnosis = classify_text(f"loading model\n{line}\n")
    assert diagnosis.cause == "unknown"
    assert diagnosis.symptom == symptom
    assert diagnosis.line_no == 2
    assert "GPU out of memory" not in diagnosis.remedy


def test_cuda_oom_is_never_retryable_and_names_the_protocol_remedies():
    diagnosis = classify_file(LOGS / "vllm-oom-engine.log")
    assert diagnosis.retryable is False
    for remedy in ("resolution", "--lowvram", "fp8", "bigger GPU class", "never blind-retry"):
        assert remedy in diagnosis.remedy


@pytest.mark.parametrize(("cause", "words"), [
    ("driver_mismatch", ("torch wheel", "CUDA", "don't rebuild")),
    ("custom_node_import", ("pin", "last known good commit")),
    ("weights_corrupt", ("re-download", "checksum", "disk")),
    ("disk_full", ("free space", "bigger volume")),
])
def test_remedies_follow_the_failure_protocol(cause, words):
    for word in words:
        assert word in REMEDIES[cause]  # type: ignore[index]


def test_unknown_failure_may_be_retried_once_per_protocol():
    diagnosis = classify_text("ValueError: something odd happened\n")
    assert diagnosis.cause == "unknown" and diagnosis.retryable is True and diagnosis.line_no is None
    assert "retry once" in diagnosis.remedy


def test_root_cause_wins_over_startup_custom_node_noise():
    text = ("   0.0 seconds (IMPORT FAILED): /workspace/ComfyUI/custom_nodes/ComfyUI-Broken\n"
            "got prompt\n"
            "!!! Exception during processing !!! Allocation on device \n")
    diagnosis = classify_text(text)
    assert (diagnosis.cause, diagnosis.line_no) == ("cuda_oom", 3)


def test_disk_full_is_the_root_cause_of_truncated_weights():
    text = ("OSError: [Errno 28] No space left on device\n"
            "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer\n")
    diagnosis = classify_text(text)
    assert (diagnosis.cause, diagnosis.line_no) == ("disk_full", 1)


def test_ansi_coloured_comfyui_lines_are_classified():
    text = "\x1b[33m[WARNING]\x1b[0m Cannot import /ComfyUI/custom_nodes/comfyui_controlnet_aux module for custom " \
           "nodes: No module named 'cv2'\n"
    diagnosis = classify_text(text)
    assert diagnosis.cause == "custom_node_import"
    assert diagnosis.line is not None and "\x1b" not in diagnosis.line


def test_comfyui_websocket_execution_error_frame_is_unpacked():
    frame = {"type": "execution_error", "data": {
        "prompt_id": "p1", "node_id": "3", "node_type": "KSampler", "executed": [],
        "exception_type": "torch.OutOfMemoryError", "exception_message": "Allocation on device ",
        "traceback": [], "current_inputs": {}, "current_outputs": {}}}
    diagnosis = classify_text(json.dumps(frame))
    assert (diagnosis.cause, diagnosis.source) == ("cuda_oom", "comfyui")


def test_runpod_generator_error_string_is_classified():
    body = {"id": "job-1", "status": "FAILED",
            "error": "handler: Error while deserializing header: HeaderTooLarge \ntraceback: Traceback ..."}
    diagnosis = classify_text(json.dumps(body))
    assert (diagnosis.cause, diagnosis.source) == ("weights_corrupt", "runpod")


def test_successful_history_json_is_not_a_failure():
    history = {"p1": {"outputs": {"9": {"images": [{"filename": "ComfyUI_00001_.png"}]}},
                      "status": {"status_str": "success", "completed": True, "messages": []}}}
    assert classify_text(json.dumps(history)).cause == "unknown"


def test_text_that_only_looks_like_json_is_read_as_a_log():
    diagnosis = classify_text("{broken json\nOSError: [Errno 28] No space left on device\n")
    assert (diagnosis.cause, diagnosis.line_no) == ("disk_full", 2)


def test_every_line_a_rule_matches_in_the_corpus_carries_one_of_its_anchors():
    # the anchor pre-filter must never hide a match
    lines = [line for path in LOGS.iterdir() if path.suffix == ".log"
             for line in path.read_text(encoding="utf-8").splitlines()]
    checked = 0
    for _label, _strong, pattern, anchors in _RULES:
        compiled = re.compile(pattern)
        for line in lines:
            if compiled.search(line):
                checked += 1
                assert any(anchor in line for anchor in anchors), (pattern, line)
    assert checked > 30


def test_vllm_kv_cache_too_small_is_a_weak_gpu_memory_signal():
    line = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be "
            "stored in KV cache (20000). Try increasing `gpu_memory_utilization` or decreasing `max_model_len`")
    diagnosis = classify_text(line + "\n")
    assert diagnosis.cause == "cuda_oom"
    assert diagnosis.evidence[0].strong is False


def test_comfyui_missing_model_file_is_model_missing_with_the_servers_line():
    body = {"error": {"type": "prompt_outputs_failed_validation", "message": "Prompt outputs failed validation",
                      "details": "", "extra_info": {}},
            "node_errors": {"4": {"errors": [{"type": "value_not_in_list", "message": "Value not in list",
                                              "details": "ckpt_name: 'sdxl.safetensors' not in ['v1-5.safetensors']",
                                              "extra_info": {"input_name": "ckpt_name"}}],
                                  "dependent_outputs": ["9"], "class_type": "CheckpointLoaderSimple"}}}
    diagnosis = classify_text(json.dumps(body))
    assert (diagnosis.cause, diagnosis.source) == ("model_missing", "comfyui")  # issue 9: was weights_corrupt
    assert "models/ folder" in diagnosis.remedy
    assert diagnosis.line == "ckpt_name: 'sdxl.safetensors' not in ['v1-5.safetensors']"


def test_big_log_starting_with_a_bracket_is_streamed_not_read_whole(tmp_path, monkeypatch):
    import gpuharness.diagnose.diagnosis as diagnose_module

    monkeypatch.setattr(diagnose_module, "JSON_MAX_BYTES", 64 * 1024)
    log = tmp_path / "comfyui.log"
    with log.open("w") as handle:
        for i in range(300_000):
            handle.write(f"[2024-11-06 23:41:{i % 60:02d}.118] {i % 20}/20 sampler step ok\n")
        handle.write("[2024-11-06 23:42:00.001] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2 GiB\n")
    tracemalloc.start()
    diagnosis = classify_file(log)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert (diagnosis.cause, diagnosis.line_no) == ("cuda_oom", 300_001)
    assert peak < 8_000_000 < log.stat().st_size, f"peak {peak} bytes for a {log.stat().st_size}-byte log"


def test_small_json_error_file_is_still_unpacked():
    assert classify_file(LOGS / "runpod-serverless-oom-status.json").source == "runpod"


def test_carriage_return_progress_bars_do_not_shift_line_numbers(tmp_path):
    log = tmp_path / "progress.log"
    log.write_bytes(b"loading\n 10%|#         |\r 50%|#####     |\r100%|##########|\n"
                    b"step\r\nRuntimeError: CUDA error: out of memory\n")
    diagnosis = classify_file(log)
    assert (diagnosis.cause, diagnosis.line_no) == ("cuda_oom", 4)
    assert classify_text(log.read_bytes().decode()).line_no == 4


def test_the_matching_segment_of_a_progress_bar_line_is_shown():
    diagnosis = classify_lines([" 95%|#########5| 19/20\rRuntimeError: CUDA error: out of memory\n"])
    assert diagnosis.line == "RuntimeError: CUDA error: out of memory"


def test_json_over_the_size_limit_is_read_as_a_log(tmp_path, monkeypatch):
    import gpuharness.diagnose.diagnosis as diagnose_module

    monkeypatch.setattr(diagnose_module, "JSON_MAX_BYTES", 16)
    diagnosis = classify_file(LOGS / "runpod-serverless-oom-status.json")
    assert (diagnosis.cause, diagnosis.source) == ("cuda_oom", "log")
