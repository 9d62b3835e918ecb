"""The probe: every remote fact of a deployment's host in one exec (the script, its framed output, the facts parsed),
taken live or replayed from its transcript, once per health run; the GPU measurement and the server's node catalog
of the same phase."""

from gpuharness.probe.facts import (
    CORRUPT_REMEDY,
    PROBE_VERSION,
    SECTION_NAMES,
    ComputeApp,
    ProbeResult,
    ProbeScript,
    ProbeTargets,
    TorchRun,
    build_script,
    digest_of,
    parse,
    parse_transcript,
    read,
    run,
)

__all__ = ["CORRUPT_REMEDY", "PROBE_VERSION", "SECTION_NAMES", "ComputeApp", "ProbeResult", "ProbeScript",
           "ProbeTargets", "TorchRun", "build_script", "digest_of", "parse", "parse_transcript", "read", "run"]
