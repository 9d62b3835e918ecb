"""Failure diagnosis: a failure log or error body classified into the failure protocol's causes, with the decisive
line and the remedy; one classifier for the health checks, the operations, the runtimes and `gpuharness diagnose`."""

from gpuharness.diagnose.diagnosis import (
    CAUSES,
    REMEDIES,
    SYMPTOM_HINTS,
    Cause,
    Diagnosis,
    Evidence,
    Source,
    Symptom,
    classify_file,
    classify_lines,
    classify_stream,
    classify_text,
)

__all__ = ["CAUSES", "REMEDIES", "SYMPTOM_HINTS", "Cause", "Diagnosis", "Evidence", "Source", "Symptom",
           "classify_file", "classify_lines", "classify_stream", "classify_text"]
