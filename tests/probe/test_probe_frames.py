"""The probe's framing (probe.framing) and its readers: each section's bytes under the run's nonce, believed
only whole. A missing, repeated, foreign or undecodable frame is probe_corrupt, naming the section; output cut off
inside a frame is an unfinished probe; recordings of probe v1-v4 replay through the legacy reader only."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from checkout import ROOT
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuharness import probe
from gpuharness.health import rules
from gpuharness.probe import facts as facts_module
from gpuharness.probe import framing, legacy, probing
from gpuharness.probe.framing import Frame
from gpuharness.probe.script import sections_in
from gpuharness.remote.local import LocalRemote

NONCE = "0123456789abcdef0123456789abcdef"
NAMES = ("gpus", "log")


def framed(*frames: Frame, done: bool = True, nonce: str = NONCE) -> str:
    return framing.encode(nonce, frames, done=done)


GPUS = Frame("gpus", 0, b"# query: index\n0\n# exit: 0\n")
LOG = Frame("log", 0, "Starting server\n\u2028@@gpuharness done\x1e\r\n".encode())


def test_frames_read_back_exactly_what_was_sent():
    read = framing.read(framed(GPUS, LOG), NONCE, NAMES)
    assert read.problem is None and read.done
    assert read.frames == {"gpus": GPUS, "log": LOG}


@pytest.mark.parametrize(("stdout", "problem"), [
    (framed(GPUS), "section 'log' is missing"),
    (framed(GPUS, LOG, LOG), "section 'log' is repeated"),
    (framed(GPUS, done=False) + framed(LOG, nonce="f" * 32), "section 'log' under another run's nonce"),
    (framed(GPUS, Frame("disk", 0, b"/ 1 2\n")), "a section the probe does not run: 'disk'"),
    (framed(GPUS, LOG).replace(f"{NONCE} log 0 {len(LOG.data)}", f"{NONCE} log 0 {len(LOG.data) + 1}"),
     "section 'log' decodes to"),
    (framed(GPUS, LOG).replace(f"{NONCE} log 0", f"{NONCE} log zero"), "a malformed frame header"),
    (framed(GPUS, LOG).replace(" 53 74", " 53 7g"), "section 'log' holds text that is not its encoding"),
    (framed(GPUS, LOG).replace(f"{NONCE} end log\n", ""), "section 'log' has no end"),
    (framed(GPUS, LOG) + "Starting server\n", "characters after the probe's end"),
    ("Starting server\n" + framed(GPUS, LOG), "text outside any frame"),
    (f"{NONCE} fatal no_private_directory\n", "no private directory"),
])
def test_output_that_is_not_the_probes_frames_is_not_believed(stdout, problem):
    read = framing.read(stdout, NONCE, NAMES)
    assert read.problem is not None and problem in read.problem, read.problem
    assert not read.done


def test_a_section_over_its_cap_is_not_believed():
    big = Frame("log", 0, b"x" * 40)
    read = framing.read(framed(GPUS, big), NONCE, NAMES, cap=32)
    assert read.problem is not None and "section 'log' printed 40 bytes, more than its cap of 32" in read.problem


def cut_points() -> list[tuple[int, set[str]]]:
    """Places to stop the output of framed(GPUS, LOG), and the frames whole before each."""
    stdout = framed(GPUS, LOG)
    after_gpus = stdout.index(f"{NONCE} end gpus\n") + len(f"{NONCE} end gpus\n")
    after_log = stdout.index(f"{NONCE} end log\n") + len(f"{NONCE} end log\n")
    return [(10, set()), (after_gpus - 5, set()), (after_gpus + 10, {"gpus"}), (after_gpus + 80, {"gpus"}),
            (after_log - 3, {"gpus"}), (after_log + 5, {"gpus", "log"})]


@pytest.mark.parametrize(("cut", "whole"), cut_points())
def test_output_that_stops_inside_a_frame_is_an_unfinished_probe(cut, whole):
    read = framing.read(framed(GPUS, LOG)[:cut], NONCE, NAMES)
    assert read.problem is None and not read.done
    assert set(read.frames) == whole


@pytest.fixture(scope="module")
def local_probe(tmp_path_factory):
    """A real probe's output from the local /bin/sh, and its facts."""
    workspace = tmp_path_factory.mktemp("ws")
    (workspace / "app.log").write_text("Starting server\nready\n")
    targets = probe.ProbeTargets(workspace=str(workspace), log_path=str(workspace / "app.log"), nvidia_smi_timeout_s=5)
    script = probe.build_script(targets)
    result = LocalRemote().exec(script.text, deadline_s=60)
    facts = probe.read(script, result)
    assert facts.complete and facts.corrupt is None
    return script, result.stdout, facts


def comparable(facts: probe.ProbeResult):
    data = facts.to_json()
    data.pop("digest")
    return data


HOSTILE_LINES = st.one_of(st.text(max_size=40), st.sampled_from([
    "@@gpuharness done", "@@gpuharness log", " 41 42", f"{'0' * 32} log 0 2", "done", "\u2028"]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_tampered_output_is_refused_or_unfinished_never_believed_as_other_facts(local_probe, data):
    """Lines inserted anywhere (host-shaped text, headers under the run's nonce and others, hex), lines dropped,
    frames duplicated: the reader refuses the output or sees an unfinished probe; it never believes other facts."""
    script, stdout, facts = local_probe
    lines = stdout.split("\n")[:-1]
    action = data.draw(st.sampled_from(["insert", "drop", "duplicate", "nonce"]))
    at = data.draw(st.integers(0, len(lines) - 1))
    if action == "insert":
        line = data.draw(st.one_of(HOSTILE_LINES, st.builds(lambda t: f"{script.nonce} {t}", HOSTILE_LINES)))
        lines.insert(at, line.replace("\n", " "))
    elif action == "drop":
        del lines[at]
    elif action == "duplicate":
        starts = [i for i, line in enumerate(lines) if line.startswith(script.nonce) and " end " not in line
                  and not line.endswith(" done")]
        start = data.draw(st.sampled_from(starts))
        end = next(i for i in range(start, len(lines)) if lines[i].startswith(f"{script.nonce} end "))
        lines[at:at] = lines[start:end + 1]
    else:
        lines[at] = lines[at].replace(script.nonce, "f" * 32)
    tampered = probe.parse("\n".join(lines) + "\n", nonce=script.nonce, sections=script.sections)
    if tampered.corrupt is None and tampered.complete:
        assert comparable(tampered) == comparable(facts)


def test_the_probe_reads_an_interpreter_path_with_a_newline_whole(tmp_path):
    odd = tmp_path / "venv\n@@gpuharness log\nx" / "bin"
    odd.mkdir(parents=True)
    python = odd / "python3"
    python.symlink_to(shutil.which("python3") or "/usr/bin/python3")
    _, facts = probe.run(LocalRemote(), probe.ProbeTargets(workspace=str(tmp_path), runtime_python=str(python)),
                         deadline_s=60)
    assert facts.smoke.interpreter == str(python) and facts.smoke.found_by == "deployment"


LEGACY_V4 = ("@@gpuharness gpus\n# query: index,name,memory.total\n0, NVIDIA H200, 143771\n# exit: 0\n"
             "@@gpuharness end rc=0\n@@gpuharness header\n| NVIDIA-SMI 580.159.04   Driver Version: 580.159.04   CUDA "
             "Version: 13.0 |\n@@gpuharness end rc=0\n@@gpuharness apps\n716, python3, 518\n@@gpuharness end rc=0\n"
             "@@gpuharness disk\n/srv/ws 264212084 66637840\n@@gpuharness end rc=0\n@@gpuharness process\n"
             "found_by port 8188 proc\n716 python3 main.py --port 8188\n@@gpuharness end rc=0\n@@gpuharness ports\n"
             "@@gpuharness end rc=0\n@@gpuharness log\nTotal VRAM 143156 MB\n@@gpuharness end rc=0\n"
             "@@gpuharness progress\n@@gpuharness end rc=0\n@@gpuharness torch\ninterpreter service_argv0 "
             "/opt/venv/bin/python3\nservice_torch loaded\nok max_abs_err=0 torch=2.11.0 device=NVIDIA H200\n"
             "smoke_rc 0\n@@gpuharness end rc=0\n@@gpuharness done\n")


def test_a_probe_v4_recording_replays_through_the_legacy_reader():
    facts = probe.parse_transcript(LEGACY_V4, "", 0, probe_version=4, nonce=None)
    assert facts.complete and facts.corrupt is None
    assert [gpu.name for gpu in facts.gpus] == ["NVIDIA H200"] and facts.driver_version == "580.159.04"
    assert facts.smoke.interpreter == "/opt/venv/bin/python3" and facts.smoke.outcome == "ok"
    assert facts.disk_free_bytes == {"/srv/ws": 66637840 * 1024} and facts.log_tail == ("Total VRAM 143156 MB",)


def test_the_legacy_reader_believes_no_repeated_section_and_no_live_output_is_read_by_it():
    repeated = LEGACY_V4.replace("@@gpuharness done", "@@gpuharness log\nclean\n@@gpuharness end rc=0\n"
                                                      "@@gpuharness done")
    facts = probe.parse_transcript(repeated, "", 0, probe_version=4, nonce=None)
    assert facts.corrupt == "section 'log' is repeated"
    # a transcript of today's probe is read under its nonce, or not at all: marked text is not its frames
    current = probe.parse_transcript(LEGACY_V4, "", 0, probe_version=probe.PROBE_VERSION, nonce=NONCE)
    assert current.corrupt is not None and "text outside any frame" in current.corrupt
    unnamed = probe.parse_transcript(LEGACY_V4, "", 0, probe_version=probe.PROBE_VERSION, nonce=None)
    assert unnamed.corrupt is not None and "names no nonce" in unnamed.corrupt
    assert legacy.LAST_MARKED_VERSION < probe.PROBE_VERSION


def test_a_corrupt_probe_fails_every_gpu_rule_with_its_remedy():
    facts = probe.parse(framed(GPUS, LOG, LOG), nonce=NONCE, sections=NAMES)
    verdict = rules.no_uncorrected_ecc(facts)
    assert verdict.cause == "probe_corrupt" and "section 'log' is repeated" in verdict.message
    assert probe.CORRUPT_REMEDY in verdict.message
    assert rules.probe_corrupt(facts) == verdict


def test_a_replayed_transcript_is_parsed_once(tmp_path, monkeypatch):
    source = ROOT / "cassettes" / "ssh" / "sim-rtx4090-comfyui.json"
    calls = []
    real = facts_module.parse_transcript
    monkeypatch.setattr(facts_module, "parse_transcript", lambda *a, **k: calls.append(1) or real(*a, **k))
    probing.PARSED.clear()
    for _ in range(15):  # one fresh record per check, as the health fixture hands each check its own
        record = probing.replay(source, "sim-rtx4090-comfyui")
        assert record.transcript is not None and record.transcript.parse().complete
    assert len(calls) == 1


def tampered_fixture(tmp_path: Path) -> Path:
    """The committed health fixture's cassettes, the healthy host's log frame sent twice."""
    cassettes = tmp_path / "cassettes"
    shutil.copytree(ROOT / "fixtures" / "health" / "cassettes", cassettes)
    path = cassettes / "ssh" / "dep_comfy_ok.json"
    document = json.loads(path.read_text())
    frames = framing.read(document["stdout"], document["nonce"], sections_in(document["probe_version"]))
    assert frames.done
    twice = [*frames.frames.values(), Frame("log", 0, b"all good\n")]
    document["stdout"] = framing.encode(document["nonce"], twice, done=True)
    path.write_text(json.dumps(document))
    return cassettes


def test_a_replayed_recording_with_a_repeated_section_fails_its_checks_as_corrupt(pytester, tmp_path):
    cassettes = tampered_fixture(tmp_path)
    result = pytester.runpytest_inprocess(str(ROOT / "checks" / "health"), "--registry",
                                          str(ROOT / "fixtures" / "health" / ".pi" / "gpu"), "--cassettes",
                                          str(cassettes), "--deployment", "dep_comfy_ok", "-p", "no:cacheprovider",
                                          "-p", "no:html", "-rf")
    failed = " ".join(line for line in result.outlines if line.startswith("FAILED"))
    for check in ("host_reachable", "gpu_matches_order", "no_uncorrected_ecc", "log_tail_has_no_classified_failure"):
        assert f"test_{check}[dep_comfy_ok]" in failed, "\n".join(result.outlines[-30:])
    assert any(line.startswith("dep_comfy_ok: the probe's output cannot be believed: section 'log' is repeated")
               for line in result.outlines)
