"""The committed health fixture replays offline: the healthy host passes, the faulty ones fail with their cause,
and a replay changes no status (fixtures/make_health.py records it)."""

import hashlib
import json
from pathlib import Path

from checkout import ROOT

from gpuharness.probe import transcripts

FIXTURE = ROOT / "fixtures" / "health"


def digest(directory: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())).hexdigest()


def test_offline_replay_of_the_health_fixture_judges_each_host_and_changes_nothing(pytester):
    before = digest(FIXTURE)
    result = pytester.runpytest_subprocess(str(ROOT / "checks" / "health"), "--registry",
                                           str(FIXTURE / ".pi" / "gpu"), "--cassettes", str(FIXTURE / "cassettes"),
                                           "-p", "no:html", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=52, failed=4, skipped=8)
    result.stdout.fnmatch_lines_random([
        "FAILED*test_disk_has_room_for_model[[]dep_comfy_full_disk[]]*",
        "FAILED*test_gpu_performs_like_its_class[[]dep_comfy_pcie[]]*",
        "*dep_comfy_pcie: GPU 0 PCIe generation (under load) Gen1 is 0.25 of its class's Gen4*likely cause: degraded "
        "link*",
        "FAILED*test_test_generation_succeeds[[]dep_comfy_oom[]]*",
        "*dep_comfy_oom: test generation failed:*torch.OutOfMemoryError*never blind-retry*",
        "*dep_comfy_ok: offline replay: checks pass on the recording; status unchanged*",
    ])
    assert digest(FIXTURE) == before


def test_the_health_fixture_names_no_temporary_path():
    for path in FIXTURE.rglob("*"):
        if path.is_file():
            text = path.read_text()
            assert "/tmp/" not in text, path
            if path.parent.name == "ssh":  # a transcript's sections are framed: read them decoded too
                assert "/tmp/" not in transcripts.recorded_text(json.loads(text)), path
