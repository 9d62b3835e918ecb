"""The validator held against a real ComfyUI server, where one runs: every graph of the validation table is posted
to the server's /prompt, and its answer must be the validator's.

Set GPUHARNESS_REAL_COMFYUI to the server's URL (e.g. a ComfyUI 0.8.0 started with `python main.py --cpu --listen
127.0.0.1`, with empty files sd15-corrupt.safetensors and sd15-truncated.safetensors in models/checkpoints, as in the
recorded catalog, and any PNG as output/rec_00005_.png, which the recorded server had). Without it these tests skip:
CI cannot fetch ComfyUI. Last run: ComfyUI 0.8.0 on CPU, 31 of 31 graphs answered alike, catalog equal but for the
two classes that list the server's own files."""

from __future__ import annotations

import os
from typing import Any

import httpx
import pytest
from test_comfy_validation import CASES

from gpuharness.runtimes.comfyui.catalog import NodeCatalog
from gpuharness.runtimes.comfyui.validation import validate
from gpuharness.sim.comfyui import recorded_catalog

SERVER = os.environ.get("GPUHARNESS_REAL_COMFYUI", "")
pytestmark = pytest.mark.skipif(not SERVER, reason="no real ComfyUI: set GPUHARNESS_REAL_COMFYUI=http://HOST:PORT")


def _answer(graph: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    response = httpx.post(f"{SERVER}/prompt", json={"prompt": graph, "client_id": "gpuharness-differential"},
                          timeout=30)
    return response.status_code, response.json()


@pytest.fixture(scope="module")
def server_catalog() -> NodeCatalog:
    return NodeCatalog(httpx.get(f"{SERVER}/object_info", timeout=30).json(), source=SERVER)


def test_the_server_serves_the_recorded_catalog(server_catalog):
    recorded = recorded_catalog()
    # LoadImage and LoadImageMask list the server's input folder; every other class is as recorded
    differing = [name for name in recorded.document if name not in ("LoadImage", "LoadImageMask")
                 and recorded.document[name] != server_catalog.document.get(name)]
    assert differing == []


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_validator_answers_as_the_server_does(name, server_catalog):
    graph, _, _, _ = CASES[name]
    verdict = validate(graph, server_catalog)
    status, body = _answer(graph)
    assert status == verdict.status, body
    if status == 200:
        assert body.get("node_errors") == verdict.node_errors
        return
    assert body["error"]["type"] == verdict.error["type"]
    # a node's errors as a multiset: ComfyUI walks a node's inputs as a set of names (execution.validate_inputs),
    # so their order changes with each server process's string hash seed
    assert {node: sorted((e["type"], e["details"]) for e in entry["errors"])
            for node, entry in body["node_errors"].items()} \
        == {node: sorted((e["type"], e["details"]) for e in entry["errors"])
            for node, entry in verdict.node_errors.items()}
