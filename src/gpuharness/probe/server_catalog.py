"""A runtime server's node catalog (ComfyUI's GET /object_info) as the health run observed it: fetched once per
deployment per run in the probe phase (over the runtime HTTP seam, by a fetch the caller hands in), recorded beside
the probe transcript in record mode and read back from there offline, so a replay judges the workflow as the live
run did. What the catalog means is the runtime's knowledge (runtimes.comfyui.workflow_fit).

Recorded catalogs are content-addressed files (`cassettes/ssh/catalogs/sha256-<hex>.json`, scrubbed as
transcripts are) that the transcript names; deployments on the same server build share one file."""

from __future__ import annotations

import functools
import hashlib
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core.base_dir import replace_below
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import GpuharnessError, UserError
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.regular_file import read_recording
from gpuharness.core.runtimes import RUNTIMES

#: The runtimes whose servers have a node catalog to validate a workflow against.
CATALOG_RUNTIMES: Final = frozenset(name for name, runtime in RUNTIMES.items() if runtime.node_catalog)
CATALOG_DIR: Final = "catalogs"


class CatalogUnavailable(GpuharnessError):
    """The server did not answer a catalog (unreachable, an error status, not a catalog): the message says which."""


class CatalogUnreadable(GpuharnessError, ValueError):
    """A recorded catalog file that cannot be read back: the message names the file."""


#: Fetches the deployment's server catalog (the /object_info document); raises CatalogUnavailable.
CatalogFetch = Callable[[Deployment], Mapping[str, Any]]
#: Scrubs secrets out of one string (the transcripts' scrubber).
Scrub = Callable[[str], str]


@final
@dataclass(frozen=True, slots=True)
class CatalogObservation(JsonFields):
    """The catalog of this run: a file holding it (and its digest), or why there is none: `error` (the live fetch
    failed) or `note` (nothing to judge by: a transcript recorded without one)."""

    file: str | None = None
    digest: str | None = None
    error: str | None = None
    note: str | None = None

    def document(self) -> Mapping[str, Any] | None:
        """The catalog document, or None when there is none (CatalogUnreadable: the recorded file cannot be read);
        what it means is the runtime's knowledge (runtimes.comfyui.workflow_fit)."""
        return _read(self.file) if self.file is not None else None

    @property
    def missing(self) -> str | None:
        """Why there is no catalog to judge by, or None when there is one."""
        if self.file is not None:
            return None
        return self.error or self.note or "no catalog"


def applies(deployment: Deployment) -> bool:
    """Whether the deployment's server has a node catalog (a ComfyUI runtime with an endpoint)."""
    return deployment.runtime in CATALOG_RUNTIMES and bool(deployment.endpoint)


def observe(fetch: CatalogFetch, deployment: Deployment, directory: Path,
            scrub: Scrub | None, *, below: Path) -> CatalogObservation:
    """Fetch the deployment's catalog once and keep it in `directory` (content-addressed), scrubbed where it is
    recorded (`scrub`; None for the run's own copy)."""
    try:
        document = fetch(deployment)
    except CatalogUnavailable as exc:
        return CatalogObservation(error=f"GET /object_info failed: {exc}")
    return store(document, directory, scrub, below=below)


def store(document: Mapping[str, Any], directory: Path, scrub: Scrub | None, *, below: Path) -> CatalogObservation:
    """Write the catalog, every string scrubbed (unless `scrub` is None), as `directory/sha256-<hex>.json` (kept if
    already there). `below`: the folder directory lies under (the cassettes, the run's shared folder), followed as
    named; the folders between and the file are never a link followed (core.base_dir)."""
    memo: dict[str, str] = {}  # a catalog repeats its strings ("INT", "default", ...) thousands of times

    def once(text: str) -> str:
        if text not in memo:
            memo[text] = scrub(text) if scrub is not None else text
        return memo[text]

    kept = _scrubbed(document, once) if scrub is not None else document
    text = json.dumps(kept, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode()).hexdigest()
    path = directory / f"sha256-{digest}.json"
    replace_below(below, path, (text + "\n").encode(), keep=True)
    return CatalogObservation(file=str(path), digest=f"sha256:{digest}")


def transcript_entry(observation: CatalogObservation | None, transcript: Path) -> dict[str, Any]:
    """What a transcript records of the catalog: the file (relative to the transcript) and digest, or the error."""
    if observation is None:
        return {}
    if observation.file is not None:
        return {"catalog": {"file": os.path.relpath(observation.file, transcript.parent),
                            "sha256": observation.digest}}
    return {"catalog_error": observation.error or observation.note}


def recorded(document: Mapping[str, Any], transcript: Path) -> CatalogObservation:
    """The catalog a transcript names, or why there is none (a transcript from before catalogs were recorded)."""
    entry = document.get("catalog")
    if isinstance(entry, Mapping) and isinstance(entry.get("file"), str):
        path = transcript.parent / str(entry["file"])
        if not path.is_file():
            return CatalogObservation(error=f"{transcript.name} names catalog {entry['file']}, which is missing; "
                                            "record the deployment again (--gpu-mode record)")
        return CatalogObservation(file=str(path), digest=entry.get("sha256"))
    if document.get("catalog_error"):
        return CatalogObservation(error=str(document["catalog_error"]))
    return CatalogObservation(note=f"{transcript.name} holds no server catalog (recorded by probe v"
                                   f"{document.get('probe_version', 1)}): the workflow is not validated before the "
                                   "test generation; record again with --gpu-mode record to judge it offline")


@functools.lru_cache(maxsize=16)
def _read(file: str) -> Mapping[str, Any]:
    """A catalog file, read once per process (the files are content-addressed: they never change)."""
    try:
        document = read_recording(Path(file), what="a recorded catalog")
    except (OSError, ValueError) as exc:
        raise CatalogUnreadable(f"{file}: cannot read the recorded catalog: {exc}") from None
    except UserError as exc:  # not a regular file, or over its cap
        raise CatalogUnreadable(f"cannot read the recorded catalog: {exc.line()}") from None
    if not isinstance(document, Mapping):
        raise CatalogUnreadable(f"{file}: the recorded catalog is not a JSON object")
    return document


def _scrubbed(value: Any, scrub: Scrub) -> Any:
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {scrub(str(key)): _scrubbed(item, scrub) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_scrubbed(item, scrub) for item in value]
    return value
