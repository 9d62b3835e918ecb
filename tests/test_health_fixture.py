"""The committed health fixture replays offline: the healthy host passes, the faulty ones fail with their cause,
and a replay changes no status (fixtures/make_health.py records it)."""

import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "fixtures" / "health"


def digest(directory: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(directory.rglob("*")) if p.is_file())).hexdigest()


def test_offline_replay_of_the_health_fixture_judges_each_host_and_changes_nothing(pytester):
    before = digest(FIXTURE)
    result = pytester.runpytest_subprocess(str(ROOT / "checks" / "health"), "--registry",
                                           str(FIXTURE / ".pi" / "gpu"), "--cassettes", str(FIXTURE / "cassettes"),
                                           "-p", "no:html", "-p", "no:cacheprovider", "-rf")
    result.assert_outcomes(passed=36, failed=3, skipped=3)
    result.stdout.fnmatch_lines_random([
        "FAILED*test_disk_has_room_for_model[[]dep_comfy_full_disk[]]*",
        "FAILED*test_test_generation_succeeds[[]dep_comfy_oom[]]*",
        "*dep_comfy_oom: test generation failed:*torch.OutOfMemoryError*never blind-retry*",
        "*dep_comfy_ok: offline replay: checks pass on the recording; status unchanged*",
    ])
    assert digest(FIXTURE) == before


def test_the_health_fixture_names_no_temporary_path():
    for path in FIXTURE.rglob("*"):
        if path.is_file():
            assert "/tmp/" not in path.read_text(), path
