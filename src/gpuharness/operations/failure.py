"""A classified failure: cause, decisive line, remedy and whether one retry may help."""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from gpuharness.diagnose import classify_text
from gpuharness.remote import RemoteError
from gpuharness.remote.lines import lines_of

#: The decisive line is cut here (a log line can be huge); the remedy never is.
LINE_CHARS = 240


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
    return Failure(diagnosis.cause, line, diagnosis.remedy, diagnosis.retryable)


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
