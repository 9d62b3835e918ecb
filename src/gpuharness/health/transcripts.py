"""Probe transcripts (cassettes/ssh/<deployment>.json): written scrubbed of secrets in record mode, replayed
offline, naming the server catalog recorded with them (cassettes/ssh/catalogs/); scrubbed by the one secrets
module (core.secrets)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from gpuharness.core.clock import now_ts
from gpuharness.core.confinement import local_path
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.regular_file import read_recording
from gpuharness.core.secrets import configured_values, scrub_text
from gpuharness.health import measuring, probe, server_catalog
from gpuharness.health.measuring import MeasurementRecord
from gpuharness.health.server_catalog import CatalogObservation
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
    return local_path(cassettes / "ssh", f"{deployment_id}.json", what="deployment id")


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


def catalog_dir(cassettes: Path) -> Path:
    """Where recorded server catalogs live: beside the transcripts that name them."""
    return cassettes / "ssh" / server_catalog.CATALOG_DIR


def write(path: Path, deployment: Deployment, route: HostRoute, result: ExecResult,
          secrets: tuple[str, ...], *, catalog: CatalogObservation | None = None,
          measurement: MeasurementRecord | None = None) -> None:
    """Write the probe's transcript, scrubbed, with its provenance, the server catalog of the same phase and the GPU
    measurement's transcript (where the policy asked for one)."""
    document = {"deployment": deployment.id, "recorded_at": now_ts(), "source": source_of(deployment, route),
                "probe_version": probe.PROBE_VERSION, "stdout": scrub(result.stdout, secrets),
                "stderr": scrub(result.stderr, secrets), "exit_status": result.exit_status,
                **server_catalog.transcript_entry(catalog, path),
                **measuring.transcript_entry(measurement, lambda text: scrub(text, secrets))}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")
