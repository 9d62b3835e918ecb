"""The committed probe transcripts (cassettes/ssh/*.json) parse, carry their provenance, and judge as expected."""

from __future__ import annotations

import json

import pytest
from checkout import ROOT

from gpuharness import probe
from gpuharness.core.deployment import Deployment
from gpuharness.health import rules


def ordered(gpu: str, count: int = 1) -> Deployment:
    """A deployment that ordered `count` of `gpu` (what gpu_matches_order reads)."""
    return Deployment(id="dep", provider="vast", status="health-checking", cost_hr=0.0, created_at="", gpu=gpu,
                      gpu_count=count)

CASSETTES = ROOT / "cassettes" / "ssh"
TRANSCRIPTS = sorted(CASSETTES.glob("*.json"))


def parsed(document: dict) -> probe.ProbeResult:
    return probe.parse_transcript(document["stdout"], document["stderr"], document["exit_status"],
                                  probe_version=document["probe_version"], nonce=document.get("nonce"))


def load(name: str) -> probe.ProbeResult:
    return parsed(json.loads((CASSETTES / f"{name}.json").read_text()))


@pytest.mark.parametrize("path", TRANSCRIPTS, ids=[p.stem for p in TRANSCRIPTS])
def test_every_transcript_has_provenance_and_a_complete_probe(path):
    document = json.loads(path.read_text())
    assert {"stdout", "stderr", "exit_status", "recorded_at", "source"} <= set(document)
    assert document["source"] in {"simulator", "real hardware"}
    assert parsed(document).complete
    assert "PRIVATE KEY" not in path.read_text()


def test_healthy_rtx4090_transcript_passes_the_gpu_rules():
    facts = load("sim-rtx4090-comfyui")
    assert rules.gpu_matches_order(facts, ordered("RTX 4090")).ok
    assert rules.driver_and_cuda(facts, "550.0", "12.4").ok
    assert rules.no_harmful_throttling(facts).ok and rules.no_uncorrected_ecc(facts).ok
    assert rules.service_up(facts, "main.py", 8188).ok


def test_two_h100_transcript_counts_both_gpus():
    facts = load("sim-h100x2-vllm")
    assert rules.gpu_matches_order(facts, ordered("H100 SXM", 2)).ok
    assert not rules.gpu_matches_order(facts, ordered("H100 SXM", 4)).ok
    assert facts.cuda_version == "12.4"


def test_old_driver_transcript_uses_the_throttle_spelling_and_fails_health():
    facts = load("sim-a6000-old-driver-throttled")
    assert "clocks_throttle_reasons.active" in facts.gpu_fields
    assert rules.no_harmful_throttling(facts).cause == "throttling"
    assert rules.no_uncorrected_ecc(facts).cause == "ecc_uncorrected"
    assert rules.driver_and_cuda(facts, "550.0", None).cause == "driver_too_old"


@pytest.mark.parametrize(("name", "cause"), [("sim-driver-mismatch", "driver_library_mismatch"),
                                             ("sim-hung-nvidia-smi", "nvidia_smi_timeout")])
def test_nvidia_smi_failure_transcripts_are_classified(name, cause):
    assert rules.gpu_matches_order(load(name), {"gpu": "RTX 4090"}).cause == cause


def test_oom_and_full_disk_transcript_fails_log_and_disk_rules():
    facts = load("sim-oom-full-disk")
    assert rules.log_tail_clean(facts, "runtime.log").cause == "cuda_oom"
    assert rules.disk_has_room(facts, "/workspace", 7 * 2**30, 10).cause == "disk_full"
