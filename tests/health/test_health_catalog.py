"""The health suite judges the workflow by the server's node catalog, taken once in the probe phase (GET /object_info
over the runtime HTTP seam) and recorded with the probe transcript: an optional module a server could not import is
a warning, a class or model file the workflow needs and the server lacks fails before anything is submitted, and an
offline replay of the recording judges the same way (pytester runs of the real checks against simulated hosts)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from health_world import AUDIO_CLASSES, run_checks

from gpuharness.sim.host import HostSpec, with_fault


def outcomes(result):
    """test id -> outcome, from the -vv lines."""
    found = {}
    for line in result.outlines:
        for word in ("PASSED", "FAILED", "SKIPPED", "ERROR"):
            if line.startswith("test_health.py::") and f" {word}" in line:
                found[line.split(" ")[0]] = word
    return found


def failure(result, check, dep):
    lines = [line for line in result.outlines if line.startswith(f"FAILED test_health.py::test_{check}[{dep}]")]
    assert lines, f"test_{check}[{dep}] did not fail:\n" + "\n".join(result.outlines[-40:])
    return lines[0]


def prompts_submitted(host):
    return [request for request in host.runtime.requests if request.startswith("POST /prompt")]


def test_an_optional_module_the_server_could_not_import_is_a_warning_and_the_server_becomes_ready(pytester, world):
    host = world.add("dep_audio", with_fault(HostSpec(), "optional_import_failure"))
    report = pytester.path / "report.xml"
    result = run_checks(pytester, world, f"--junitxml={report}")
    result.assert_outcomes(passed=15, skipped=1)
    assert world.deployment("dep_audio")["status"] == "ready"
    text = result.stdout.str()
    assert "HealthWarning: dep_audio:" in text and "nodes_audio.py" in text, "the warnings summary names the line"
    assert "gpuharness warning: dep_audio:" in text, "-rA shows it in the check's captured output"
    assert "harmless to this workflow" in text
    properties = [p.get("value") for p in ET.parse(report).iter("property")
                  if p.get("name") == "gpuharness_health_warning"]
    assert any("Cannot import /workspace/ComfyUI/comfy_extras/nodes_audio.py" in value for value in properties)
    assert [r for r in host.runtime.requests if r.startswith("GET /object_info")] == ["GET /object_info"]


def test_a_workflow_needing_a_class_the_server_lacks_fails_with_custom_node_missing_and_is_never_submitted(
        pytester, world):
    host = world.add("dep_audio", with_fault(HostSpec(), "optional_import_failure"), workflow="sdxl-with-audio")
    result = run_checks(pytester, world)
    generation = failure(result, "test_generation_succeeds", "dep_audio")
    assert "EmptyLatentAudio" in generation and "[custom_node_missing]" in generation and "not submitted" in generation
    log = failure(result, "log_tail_has_no_classified_failure", "dep_audio")
    assert "nodes_audio.py" in log and ", ".join(AUDIO_CLASSES) in log, "the log line and every class it needs"
    assert prompts_submitted(host) == [], "a graph the server would refuse is never submitted"
    deployment = world.deployment("dep_audio")
    assert deployment["status"] == "health-checking"
    assert {"log_tail_has_no_classified_failure", "test_generation_succeeds"} <= set(
        deployment["health"]["failed_checks"])


def test_a_missing_custom_node_fails_the_test_generation_with_custom_node_missing_naming_the_class(pytester, world):
    host = world.add("dep_node", with_fault(HostSpec(), "missing_custom_node"), workflow="sdxl-custom-sampler")
    result = run_checks(pytester, world)
    line = failure(result, "test_generation_succeeds", "dep_node")
    assert "the server has no node class ClownsharKSampler_Beta [custom_node_missing]" in line
    assert prompts_submitted(host) == []


def test_a_missing_checkpoint_fails_the_test_generation_with_model_missing_naming_what_the_server_has(
        pytester, world):
    host = world.add("dep_model", with_fault(HostSpec(), "missing_model"))
    result = run_checks(pytester, world)
    line = failure(result, "test_generation_succeeds", "dep_model")
    assert "model file 'sdxl.safetensors' is not on the server (it has: no files) [model_missing]" in line
    assert prompts_submitted(host) == []
    assert world.deployment("dep_model")["health"]["cause"] == "model_missing"


def test_an_offline_replay_of_the_recording_judges_as_the_live_run_did(pytester, world):
    world.add("dep_audio", with_fault(HostSpec(), "optional_import_failure"))
    world.add("dep_needs_audio", with_fault(HostSpec(), "optional_import_failure"), workflow="sdxl-with-audio")
    world.add("dep_model", with_fault(HostSpec(), "missing_model"))
    cassettes = pytester.path / "cassettes"
    chosen = [arg for dep in ("dep_audio", "dep_needs_audio", "dep_model") for arg in ("--deployment", dep)]
    recorded = run_checks(pytester, world, "--cassettes", str(cassettes), *chosen, mode="record")
    catalogs = sorted((cassettes / "ssh" / "catalogs").iterdir())
    assert catalogs, "the catalogs are recorded beside the transcripts"
    entry = json.loads((cassettes / "ssh" / "dep_audio.json").read_text())["catalog"]
    assert (cassettes / "ssh" / entry["file"]).is_file() and entry["sha256"].startswith("sha256:")
    for host in world.hosts.values():
        host.stop()  # offline touches no host and no server
    replayed = run_checks(pytester, world, "--cassettes", str(cassettes), *chosen, mode="offline")
    assert outcomes(replayed) == outcomes(recorded)
    assert outcomes(replayed)["test_health.py::test_test_generation_succeeds[dep_needs_audio]"] == "FAILED"
    assert outcomes(replayed)["test_health.py::test_test_generation_succeeds[dep_model]"] == "FAILED"
    assert outcomes(replayed)["test_health.py::test_log_tail_has_no_classified_failure[dep_audio]"] == "PASSED"
    replayed.stdout.fnmatch_lines(["*dep_audio: offline replay: checks pass on the recording*"])


def test_a_transcript_without_a_catalog_replays_with_the_validation_skipped_and_a_note(pytester, world):
    world.add("dep_old", with_fault(HostSpec(), "optional_import_failure"))
    cassettes = pytester.path / "cassettes"
    run_checks(pytester, world, "--cassettes", str(cassettes), mode="record").assert_outcomes(passed=15, skipped=1)
    transcript = cassettes / "ssh" / "dep_old.json"
    document = json.loads(transcript.read_text())
    del document["catalog"]  # as recorded before catalogs were
    transcript.write_text(json.dumps(document))
    world.hosts["dep_old"].stop()
    replayed = run_checks(pytester, world, "--cassettes", str(cassettes), "--deployment", "dep_old", mode="offline")
    replayed.assert_outcomes(passed=15, skipped=1)
    text = replayed.stdout.str()
    assert "dep_old.json holds no server catalog" in text and "not validated" in text
    assert "not judged against the workflow" in text, "the import failure is a warning, not a failure"


def test_the_catalog_is_fetched_once_per_deployment_per_run_across_workers(pytester, world):
    hosts = [world.add(f"dep_{n}", with_fault(HostSpec(), "optional_import_failure")) for n in range(2)]
    run_checks(pytester, world, "-n", "2").assert_outcomes(passed=30, skipped=2)
    for host in hosts:
        assert [r for r in host.runtime.requests if r.startswith("GET /object_info")] == ["GET /object_info"]
        assert host.stats == {"ssh_connections": 1, "ssh_execs": 1}
