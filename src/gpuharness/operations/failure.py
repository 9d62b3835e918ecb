"""A classified failure: cause, decisive line, remedy and whether one retry may help."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, final

from gpuharness.diagnose import classify_text
from gpuharness.diagnose.diagnosis import REMEDIES, Cause
from gpuharness.remote import RemoteError
from gpuharness.remote.lines import lines_of

#: The decisive line is cut here (a log line can be huge); the remedy never is.
LINE_CHARS = 240

#: An unknown cause is retried once only when its log shows a failure known to be transient (never blindly: a
#: timeout is an unknown outcome, and the same input fails the same way).
TRANSIENT: Final = re.compile(
    r"Connection(?:ResetError| reset| aborted|AbortedError| refused|RefusedError)|ECONNRESET|Broken pipe|"
    r"RemoteDisconnected|Server disconnected|\bHTTP (?:502|503|504)\b|Bad Gateway|Service Unavailable|"
    r"temporarily unavailable|Try again", re.IGNORECASE)
#: A runtime that answers the request itself with 400/422 refused its inputs.
REFUSED_REQUEST: Final = re.compile(r"\bHTTP (?:400|422)\b")
#: A runtime's refusal at submit, by the cause the refusal names (ComfyUI's /prompt validation, the graph build).
REFUSED_AS: Final[dict[str, Cause]] = {
    "bad_input": "bad_input", "input_missing": "bad_input", "invalid_value": "bad_input",
    "invalid_graph": "bad_input", "custom_node_missing": "custom_node_missing", "model_missing": "model_missing"}
#: Unknown-cause symptoms whose remedy is one retry (a CUDA fault may be the instance's, not the job's).
RETRY_SYMPTOMS: Final = ("illegal_memory_access", "cuda_error")


@final
@dataclass(frozen=True, slots=True)
class Failure:
    cause: str
    line: str | None
    remedy: str
    retryable: bool

    def message(self) -> str:
        """One line: cause, the decisive log line, and the remedy."""
        text = f"cause: {self.cause}"
        if self.line:
            line = " ".join(self.line.split())
            text += f" — {line if len(line) <= LINE_CHARS else line[:LINE_CHARS - 1] + '…'}"
        return f"{text}; remedy: {self.remedy}"


def classify(text: str) -> Failure:
    """Classify a failure log with the diagnose engine; an unknown cause keeps the last meaningful line."""
    diagnosis = classify_text(text)
    line = diagnosis.line
    if line is None:
        tail = [x for x in lines_of(text) if x.strip() and not x.startswith(("GH-PROGRESS", "GH-BYTES"))]
        line = tail[-1] if tail else None
    if diagnosis.cause != "unknown":
        return Failure(diagnosis.cause, line, diagnosis.remedy, diagnosis.retryable)
    refused = REFUSED_REQUEST.search(text)
    if refused:
        return Failure("bad_input", line, REMEDIES["bad_input"], False)
    if diagnosis.symptom in RETRY_SYMPTOMS or TRANSIENT.search(text):
        return Failure("unknown", line, diagnosis.remedy, diagnosis.retryable)
    return Failure("unknown", line, "no known cause, and nothing in the log says it is transient: read the log "
                   "tail and fix the job; not retried (a retry would bill the same failure twice)", False)


def refusal(exc: Exception) -> Failure:
    """The runtime (or the job's graph build) refused the job at submit: the cause it names, never retried; a
    refusal that names none is classified from its text."""
    named = getattr(exc, "cause", None)
    cause = REFUSED_AS.get(named) if isinstance(named, str) else None
    if cause is None:
        return classify(str(exc))
    remedy = getattr(exc, "remedy", None)
    return Failure(cause, str(exc), remedy if isinstance(remedy, str) and remedy else REMEDIES[cause], False)


def transport_failure(exc: RemoteError, phase: str) -> Failure:
    """An SSH failure: one attempt per target and phase, never a blind retry."""
    remedy = {"timeout": "the host did not answer within the deadline: check it with one probe "
                         "(pytest checks/health) before re-running; no blind retry",
              "unreachable": "the route is down: check the SSH endpoint and the provider's status",
              "host_key_unknown": "pin the host key in known_hosts (or opt into trust-on-first-use)",
              "host_key_changed": "the host key changed: verify the instance identity before trusting it",
              "auth": "the key was refused: check the SSH key the instance was launched with"}.get(
        exc.kind, "re-run the phase once the connection is healthy")
    return Failure(f"ssh_{exc.kind}", f"{phase}: {exc.target}: {exc.kind}: {exc.message}", exc.remedy or remedy,
                   False)
