"""Probe transcripts (cassettes/ssh/<deployment>.json): written scrubbed of secrets in record mode, replayed
offline. The scrubbing of probe output lives here, in one place (to be folded into the one secrets module)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from gpuharness.core.clock import now_ts
from gpuharness.core.confinement import local_path
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.health import probe
from gpuharness.providers import cassette
from gpuharness.remote import ExecResult

if TYPE_CHECKING:  # the route module imports paramiko (~0.4 s): only a live probe needs it
    from gpuharness.remote.route import HostRoute

SECRET_PATTERNS: Final = (
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
    re.compile(r"(?i)(authorization:\s*bearer\s+)\S+"),
    re.compile(r"(?i)((?:api[_-]?key|token|password|secret)\s*[=:]\s*)\S+"),
)


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Remove secrets from a transcript: known values, private key blocks, bearer tokens, key=value secrets."""
    text = cassette.Scrubber(secrets).text(text)
    for pattern in SECRET_PATTERNS:
        text = pattern.sub(lambda m: (m.group(1) if m.groups() else "") + cassette.REDACTED, text)
    return text


def known_secrets(registry: Registry) -> tuple[str, ...]:
    """The secret values recordings must never hold: the providers' credentials (and the test secret)."""
    try:
        envs = [p.get("credential_env") for p in registry.providers()]
    except UserError:
        envs = []
    return cassette.secret_values(envs)


def transcript_path(cassettes: Path, deployment_id: str) -> Path:
    return local_path(cassettes / "ssh", f"{deployment_id}.json", what="deployment id")


def source_of(deployment: Mapping[str, Any], route: HostRoute) -> str:
    """Where a recording comes from: the deployment's `labels.source`, else the simulator for a loopback host."""
    loopback = route.transport == "ssh" and route.host in {"127.0.0.1", "localhost"}
    return str((deployment.get("labels") or {}).get("source") or ("simulator" if loopback else "real hardware"))


def write(path: Path, deployment: Mapping[str, Any], route: HostRoute, result: ExecResult,
          secrets: tuple[str, ...]) -> None:
    """Write the probe's transcript, scrubbed, with its provenance."""
    document = {"deployment": deployment["id"], "recorded_at": now_ts(), "source": source_of(deployment, route),
                "probe_version": probe.PROBE_VERSION, "stdout": scrub(result.stdout, secrets),
                "stderr": scrub(result.stderr, secrets), "exit_status": result.exit_status}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
