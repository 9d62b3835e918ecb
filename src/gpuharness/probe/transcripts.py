"""Probe transcripts (cassettes/ssh/<deployment>.json): written scrubbed of secrets in record mode, replayed
offline, naming the server catalog recorded with them (cassettes/ssh/catalogs/); scrubbed by the one secrets
module (core.secrets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuharness.core.base_dir import replace_below
from gpuharness.core.clock import now_ts
from gpuharness.core.confinement import plain_name
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.regular_file import read_recording
from gpuharness.core.secrets import configured_values, redact
from gpuharness.probe import framing, measuring, server_catalog
from gpuharness.probe.measuring import MeasurementRecord
from gpuharness.probe.script import PROBE_VERSION, SECTION_NAMES
from gpuharness.probe.server_catalog import CatalogObservation
from gpuharness.remote import ExecResult

if TYPE_CHECKING:  # the route module imports paramiko (~0.4 s): only a live probe needs it
    from gpuharness.remote.route import HostRoute

def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """Remove secrets from a transcript (core.secrets' one redactor): known values in any form, private key blocks,
    bearer tokens, key=value secrets."""
    return redact(text, secrets)


def known_secrets(registry: Registry) -> tuple[str, ...]:
    """The secret values recordings must never hold: the providers' credentials (and the test secret)."""
    try:
        envs = [p.get("credential_env") for p in registry.providers()]
    except UserError:
        envs = []
    return configured_values(envs)


def transcript_path(cassettes: Path, deployment_id: str) -> Path:
    """cassettes/ssh/<deployment>.json (the id confined to a plain file name)."""
    return cassettes / "ssh" / plain_name(f"{deployment_id}.json", what="deployment id")


def source_of(deployment: Deployment, route: HostRoute) -> str:
    """Where a recording comes from: the deployment's `labels.source`, else the simulator for a loopback host."""
    loopback = route.transport == "ssh" and route.host in {"127.0.0.1", "localhost"}
    return str(deployment.labels.get("source") or ("simulator" if loopback else "real hardware"))


def recorded_catalog(cassettes: Path, deployment_id: str) -> CatalogObservation | None:
    """The server catalog recorded with the deployment's probe transcript (None: no transcript, or not JSON)."""
    path = transcript_path(cassettes, deployment_id)
    try:
        document = read_recording(path, what="a probe transcript")
    except (OSError, ValueError, UserError):
        return None
    return server_catalog.recorded(document, path) if isinstance(document, dict) else None


def recorded_text(document: dict[str, Any]) -> str:
    """What a recorded transcript holds as plain text: its sections decoded (their frames hide text from a plain
    search), then its stderr. For checking what a recording kept (no secret, no temporary path)."""
    stdout = str(document.get("stdout", ""))
    nonce = document.get("nonce")
    if isinstance(nonce, str) and nonce:
        frames = framing.read(stdout, nonce, SECTION_NAMES)
        stdout = "".join(frame.text for frame in frames.frames.values())
    return stdout + str(document.get("stderr", ""))


def catalog_dir(cassettes: Path) -> Path:
    """Where recorded server catalogs live: beside the transcripts that name them."""
    return cassettes / "ssh" / server_catalog.CATALOG_DIR


def write(path: Path, deployment: Deployment, route: HostRoute, result: ExecResult, nonce: str,
          secrets: tuple[str, ...], *, catalog: CatalogObservation | None = None,
          measurement: MeasurementRecord | None = None) -> None:
    """Write the probe's transcript, with its nonce, scrubbed (each section's text, framed again), with its
    provenance, the server catalog of the same phase and the GPU measurement's transcript (where the policy asked
    for one)."""
    stdout = framing.rewrite(result.stdout, nonce, SECTION_NAMES, lambda text: scrub(text, secrets))
    document = {"deployment": deployment.id, "recorded_at": now_ts(), "source": source_of(deployment, route),
                "probe_version": PROBE_VERSION, "nonce": nonce, "stdout": stdout,
                "stderr": scrub(result.stderr, secrets), "exit_status": result.exit_status,
                **server_catalog.transcript_entry(catalog, path),
                **measuring.transcript_entry(measurement, lambda text: scrub(text, secrets))}
    # path is transcript_path's: the cassettes folder is the user's; ssh/ and the file are never a link followed
    replace_below(path.parents[1], path, redact((json.dumps(document, indent=2) + "\n").encode(), secrets))
