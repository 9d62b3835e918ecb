"""The adapters speak as the official clients do: for the same operation, the simulator records the same method,
path, query, body and the same kind of Authorization / Content-Type from gpuharness as from `vastai` or `runpod`.

Our own behaviour stays where the runbooks need it: the idempotency key rides in the label / name (the client is
called with the same label), and the list stays one call plus pages."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from secrets import token_hex
from typing import Any

import pytest
from official_clients import isolated_env, require, run_python

from gpuharness.providers.base import LaunchSpec
from gpuharness.providers.factory import PhaseOptions, build_provider, build_serverless
from gpuharness.sim import Simulator
from gpuharness.sim.exchanges import RecordedRequest
from gpuharness.sim.graphql_syntax import Field, parse

KEY = "sim-wire-key-" + token_hex(8)  # made per run
ENV = {"SIM_KEY": KEY}
pytestmark = pytest.mark.slow


def adapter(sim: Simulator, kind: str) -> Any:
    return build_provider({"name": kind, "kind": kind, "credential_env": "SIM_KEY", "api_base": sim.url(kind)},
                          env=ENV, options=PhaseOptions(sleep=lambda _s: None))


def recorded(sim: Simulator, action: Callable[[], object]) -> list[RecordedRequest]:
    sim.requests.clear()
    action()
    return sim.requests.all()


def shape(request: RecordedRequest) -> tuple[Any, ...]:
    """What must match: method, path, query, body, and the auth scheme and content type (not the user agent)."""
    headers = request.headers
    return (request.method, request.path, request.query, request.body, headers.get("authorization"),
            headers.get("content-type", "").split(";")[0] if request.body is not None else None)


def renamed(requests: list[RecordedRequest], old: str, new: str) -> list[tuple[Any, ...]]:
    """The shapes with an id in the path swapped (each side acts on its own instance or job)."""
    return [tuple(v.replace(old, new) if isinstance(v, str) else v for v in shape(r)) for r in requests]


def vast_sdk(sim: Simulator, home: Path, body: str) -> Callable[[], object]:
    python = require("vastai")
    code = (f"import json\nfrom vastai import VastAI\nv = VastAI(api_key={KEY!r}, server_url={sim.url('vast')!r})\n"
            f"{body}\nprint(json.dumps(None))")
    return lambda: run_python(python, code, isolated_env(home, {"VASTAI_NO_UPDATE_CHECK": "1"}))


def runpod_sdk(sim: Simulator, home: Path, body: str) -> Callable[[], object]:
    python = require("runpod")
    env = isolated_env(home, {"RUNPOD_API_BASE_URL": sim.url("runpod"),
                              "RUNPOD_ENDPOINT_BASE_URL": sim.url("runpod-serverless") + "/v2"})
    code = f"import json\nimport runpod\nrunpod.api_key = {KEY!r}\n{body}\nprint(json.dumps(None))"
    return lambda: run_python(python, code, env)


def test_vast_list_pages_as_show_instances_does(sim: Simulator, tmp_path: Path):
    sim.create_instances("vast", 30)  # two pages of 25
    ours = recorded(sim, adapter(sim, "vast").list_instances)
    theirs = recorded(sim, vast_sdk(sim, tmp_path, "v.show_instances()"))
    assert len(ours) == 2 and [shape(r) for r in ours] == [shape(r) for r in theirs]
    assert ours[0].query == {"select_filters": ["{}"], "order_by": ['[{"col": "id", "dir": "asc"}]'],
                             "limit": ["25"]}
    assert "after_token" in ours[1].query


def test_vast_show_and_account_read_as_the_sdk_does(sim: Simulator, tmp_path: Path):
    [instance_id] = sim.create_instances("vast", 1)
    vast = adapter(sim, "vast")
    ours = recorded(sim, lambda: (vast.get_instance(instance_id), vast.check()))
    theirs = recorded(sim, vast_sdk(sim, tmp_path, f"v.show_instance({instance_id}); v.show_user()"))
    assert [shape(r) for r in ours] == [shape(r) for r in theirs]
    assert [r.path for r in ours] == [f"/vast/api/v0/instances/{instance_id}/", "/vast/api/v0/users/current"]


def test_vast_offer_search_sends_the_clis_query(sim: Simulator, tmp_path: Path):
    ours = recorded(sim, lambda: adapter(sim, "vast").offers("NVIDIA GeForce RTX 4090", gpu_count=1, limit=64))
    theirs = recorded(sim, vast_sdk(sim, tmp_path, 'v.search_offers("gpu_name=RTX_4090 num_gpus=1", '
                                                    'order="dph_total", limit=64)'))
    assert [shape(r) for r in ours] == [shape(r) for r in theirs]
    assert ours[0].body["num_gpus"] == {"eq": "1"} and ours[0].body["gpu_name"] == {"eq": "RTX 4090"}


def test_vast_create_body_is_the_clients_with_the_key_as_label(sim: Simulator, tmp_path: Path):
    spec = LaunchSpec(gpu="RTX 4090", image="vastai/comfy:latest", idempotency_key="gh-dep-wire-1",
                      ports=("22/tcp", "8188/http"), env={"MODE": "test"}, offer_id="5000001", disk_gb=40)
    ours = recorded(sim, lambda: adapter(sim, "vast").launch(spec))
    theirs = recorded(sim, vast_sdk(sim, tmp_path, """
v.create_instance(5000001, image="vastai/comfy:latest", disk=40, label="gh-dep-wire-1",
                  env={"MODE": "test", "-p 8188:8188": "1"}, ssh=True, direct=True, cancel_unavail=True)"""))
    assert [shape(r) for r in ours] == [shape(r) for r in theirs]
    assert ours[0].body["env"] == {"MODE": "test", "-p 8188:8188": "1"} and ours[0].body["client_id"] == "me"


def test_vast_stop_start_and_destroy_as_the_sdk(sim: Simulator, tmp_path: Path):
    first, second = sim.create_instances("vast", 2)
    vast = adapter(sim, "vast")
    ours = recorded(sim, lambda: (vast.stop(first), vast.start(first), vast.terminate(first)))
    theirs = recorded(sim, vast_sdk(sim, tmp_path, f"v.stop_instance({second}); v.start_instance({second}); "
                                                    f"v.destroy_instance({second})"))
    assert [shape(r) for r in ours] == renamed(theirs, second, first)
    assert [r.body for r in ours] == [{"state": "stopped"}, {"state": "running"}, {}]


def _operation(request: RecordedRequest) -> tuple[str, str | None, str, set[str]]:
    operation = parse(request.body["query"])
    [root] = [s for s in operation.selections if isinstance(s, Field)]
    selected = {s.name for s in root.selections or [] if isinstance(s, Field)}
    return operation.kind, operation.name, root.name, selected


def test_runpod_gpu_types_come_from_graphql_as_get_gpus_asks(sim: Simulator, tmp_path: Path):
    ours = recorded(sim, lambda: adapter(sim, "runpod").offers("RTX 4090"))
    theirs = recorded(sim, runpod_sdk(sim, tmp_path, "runpod.get_gpus()"))
    [mine], [sdk] = ours, theirs
    assert (mine.method, mine.path, mine.query, set(mine.body)) == (sdk.method, sdk.path, sdk.query, set(sdk.body))
    assert (mine.headers["authorization"], mine.headers["content-type"]) == \
        (sdk.headers["authorization"], sdk.headers["content-type"])
    kind, name, root, fields = _operation(mine)
    sdk_kind, sdk_name, sdk_root, sdk_fields = _operation(sdk)
    assert (kind, name, root) == (sdk_kind, sdk_name, sdk_root) and fields >= sdk_fields


def test_serverless_calls_match_the_endpoint_client(sim: Simulator, tmp_path: Path):
    entry = {"name": "rs", "kind": "runpod-serverless", "credential_env": "SIM_KEY",
             "api_base": sim.url("runpod-serverless")}
    endpoint = build_serverless(entry, "ep-wire", env=ENV, options=PhaseOptions(sleep=lambda _s: None))

    def ours_calls() -> None:
        job = endpoint.run({"prompt": "a cat"})
        endpoint.status(job.id)
        endpoint.cancel(job.id)
        endpoint.runsync({"prompt": "a dog"})
        endpoint.health()

    ours = recorded(sim, ours_calls)
    theirs = recorded(sim, runpod_sdk(sim, tmp_path, """
ep = runpod.Endpoint("ep-wire")
job = ep.run({"prompt": "a cat"})
job.status(); job.cancel(); ep.run_sync({"prompt": "a dog"}); ep.health()"""))
    our_job, their_job = (next(r.path.rsplit("/", 1)[1] for r in side if "/status/" in r.path)
                          for side in (ours, theirs))
    assert [shape(r) for r in ours] == renamed(theirs, their_job, our_job)
    assert [r.path.split("/")[-2 if "/status/" in r.path or "/cancel/" in r.path else -1] for r in ours] == \
        ["run", "status", "cancel", "runsync", "health"]
