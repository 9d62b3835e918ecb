"""The public API of gpuharness is deliberate: this pins it."""

from __future__ import annotations

import gpuharness


def test_exported_members() -> None:
    assert gpuharness.__all__ == [
        "ALLOWED",
        "STATES",
        "Action",
        "Decision",
        "KeepAliveDecision",
        "Ledger",
        "Policy",
        "Registry",
        "UserError",
        "keep_alive",
        "transition",
    ]


def test_every_exported_member_exists_and_is_documented() -> None:
    for name in gpuharness.__all__:
        member = getattr(gpuharness, name)
        if callable(member):
            assert member.__doc__, f"gpuharness.{name} has no docstring"


def test_exported_members_come_from_gpuharness() -> None:
    for name in gpuharness.__all__:
        member = getattr(gpuharness, name)
        module = getattr(member, "__module__", "gpuharness")
        assert module.startswith("gpuharness"), name


def test_the_probe_and_diagnose_packages_export_their_faces() -> None:
    """The two packages whose callers read them by the package name (`probe.run(...)`, `from gpuharness.diagnose
    import classify_text`) export a deliberate list, every name from a module of the package itself."""
    from gpuharness import diagnose, probe

    assert probe.__all__ == ["CORRUPT_REMEDY", "PROBE_VERSION", "SECTION_NAMES", "ComputeApp", "ProbeResult",
                             "ProbeScript", "ProbeTargets", "TorchRun", "build_script", "digest_of", "parse",
                             "parse_transcript", "read", "run"]
    assert diagnose.__all__ == ["CAUSES", "REMEDIES", "SYMPTOM_HINTS", "Cause", "Diagnosis", "Evidence", "Source",
                                "Symptom", "classify_file", "classify_lines", "classify_stream", "classify_text"]
    for package in (probe, diagnose):
        for name in package.__all__:
            member = getattr(package, name)
            module = getattr(member, "__module__", package.__name__)
            if callable(member) and module.startswith("gpuharness"):
                assert module.startswith(package.__name__ + "."), f"{package.__name__}.{name} comes from {module}"
