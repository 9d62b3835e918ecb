"""One health run's probe phase: each deployment is probed once per run, live, recorded or replayed per mode,
and the record shared through a directory every process of the run (xdist workers included) sees."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import final

from filelock import FileLock

from gpuharness.core.clock import now_ts
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.regular_file import read_recording
from gpuharness.probe import probing, progress, server_catalog, transcripts
from gpuharness.probe.probing import ProbeFailure, ProbeRecord
from gpuharness.probe.server_catalog import CatalogFetch, CatalogObservation
from gpuharness.providers.cassette import Mode

#: How long a process waits for another one's probe of the same deployment (a probe has its own deadlines).
LOCK_TIMEOUT_S = 600


@final
@dataclass(frozen=True, slots=True)
class ProbeSession:
    """The seam between the checks and their subject: `probe(deployment)` is the same record whether the host was
    reached live, live and recorded, or replayed from its transcript. `catalogs` fetches a ComfyUI server's node
    catalog over the runtime HTTP seam (live and record modes): one GET per deployment per run, beside the probe."""

    registry: Registry
    mode: Mode
    cassettes: Path
    shared_dir: Path  # one per run, shared by the controller and every worker
    catalogs: CatalogFetch | None = None

    def probe(self, deployment: Deployment) -> ProbeRecord:
        """The deployment's probe for this run: taken once under a file lock, then read by every process."""
        if deployment.is_serverless:
            return ProbeRecord(route=None, not_applicable="a serverless endpoint has no host to probe")
        cached = self.shared_dir / f"probe-{deployment.id}.json"
        with FileLock(str(cached) + ".lock", timeout=LOCK_TIMEOUT_S):
            if cached.exists():
                return ProbeRecord.from_json(read_recording(cached, what="this run's probe record"))
            record = replace(self._take(deployment), probed_at=now_ts())
            record = replace(record, progress=self._progress(deployment, record))
            cached.write_text(json.dumps(record.to_json()))
            return record

    def _take(self, deployment: Deployment) -> ProbeRecord:
        path = transcripts.transcript_path(self.cassettes, deployment.id)
        if self.mode is Mode.OFFLINE:
            return probing.replay(path, deployment.id, catalog=server_catalog.applies(deployment))
        catalog = self._catalog(deployment)
        try:
            return probing.live(self.registry, deployment, record_to=path if self.mode is Mode.RECORD else None,
                                catalog=catalog)
        except UserError as exc:  # no usable route recorded: the registry needs fixing, not the host
            return ProbeRecord(route=None, failure=ProbeFailure("no_route", exc.line()), catalog=catalog)

    def _catalog(self, deployment: Deployment) -> CatalogObservation | None:
        """The server's catalog, fetched live; kept scrubbed beside the transcripts in record mode."""
        if self.catalogs is None or not server_catalog.applies(deployment):
            return None
        if self.mode is Mode.RECORD:
            secrets = transcripts.known_secrets(self.registry)
            return server_catalog.observe(self.catalogs, deployment, transcripts.catalog_dir(self.cassettes),
                                          lambda text: transcripts.scrub(text, secrets), below=self.cassettes)
        return server_catalog.observe(self.catalogs, deployment, self.shared_dir / server_catalog.CATALOG_DIR, None,
                                      below=self.shared_dir)

    def _progress(self, deployment: Deployment, record: ProbeRecord) -> probing.ProgressObservation | None:
        """A running job's progress marker, observed once per run (journaled only when the probe was live)."""
        if deployment.status != "running" or record.transcript is None:
            return None
        current = record.transcript.parse().progress
        return progress.observe(self.registry, deployment, current, route=record.route,
                                journaled=self.mode is not Mode.OFFLINE)
