"""Probe transcripts (cassettes/ssh/<deployment>.json): written scrubbed of secrets in record mode, replayed
offline, scrubbed by the one secrets module (core.secrets)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuharness.core.clock import now_ts
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.secrets import configured_values, scrub_text
from gpuharness.health import probe
from gpuharness.remote import ExecResult

if TYPE_CHECKING:  # the route module imports paramiko (~0.4 s): only a live probe needs it
    from gpuharness.remote.route import HostRoute

def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Remove secrets from a transcript: known values, private key blocks, bearer tokens, key=value secrets."""
    return scrub_text(text, secrets)


def known_secrets(registry: Registry) -> tuple[str, ...]:
    """The secret values recordings must never hold: the providers' credentials (and the test secret)."""
    try:
        envs = [p.get("credential_env") for p in registry.providers()]
    except UserError:
        envs = []
    return configured_values(envs)


def transcript_path(cassettes: Path, deployment_id: str) -> Path:
    return cassettes / "ssh" / f"{deployment_id}.json"


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
