"""One health run's probe phase, without pytest in between: once per deployment per run, the same record live,
recorded or replayed, and a running job's progress observed once (journaled only from a live probe)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gpuharness.core.lifecycle import read_journal
from gpuharness.probe import progress
from gpuharness.probe.probing import ProbeRecord
from gpuharness.probe.session import ProbeSession
from gpuharness.providers.cassette import Mode
from gpuharness.remote.connections import record_probe
from gpuharness.remote.route import HostRoute
from gpuharness.runtimes.comfyui import workflow_fit


def session(world, tmp_path, mode=Mode.LIVE, run="run-1"):
    shared = tmp_path / run
    shared.mkdir(exist_ok=True)
    return ProbeSession(world.registry, mode, tmp_path / "cassettes", shared)


def observations(world, dep_id):
    return [e for e in read_journal(world.registry.journal_path)
            if e["deployment"] == dep_id and e.get("note") == progress.NOTE]


def test_a_deployment_is_probed_once_per_run_and_every_reader_gets_the_same_record(world, tmp_path):
    world.add("dep_ok")
    probes = session(world, tmp_path)
    first = probes.probe(world.registry.deployment("dep_ok"))
    again = session(world, tmp_path).probe(world.registry.deployment("dep_ok"))  # another worker of the same run
    assert again == first and first.transcript is not None and first.transcript.parse().complete
    assert world.hosts["dep_ok"].stats == {"ssh_connections": 1, "ssh_execs": 1}
    assert world.registry.items("connections.json")[0]["last_probe"]["result"] == "exit 0"


def test_a_running_jobs_progress_is_journaled_once_per_live_run_with_when_it_was_seen(world, tmp_path):
    world.add("dep_run", status="running")
    first = session(world, tmp_path, run="run-1").probe(world.registry.deployment("dep_run"))
    session(world, tmp_path, run="run-1").probe(world.registry.deployment("dep_run"))
    assert first.progress is not None and first.progress.previous is None
    second = session(world, tmp_path, run="run-2").probe(world.registry.deployment("dep_run"))
    seen = observations(world, "dep_run")
    assert len(seen) == 2 and all(e["observed_at"] and e["from"] == e["to"] == "running" for e in seen)
    assert second.progress is not None
    assert (second.progress.previous, second.progress.previous_at) == (seen[0]["marker"], seen[0]["observed_at"])


def test_an_offline_replay_observes_progress_but_journals_nothing(world, tmp_path):
    world.add("dep_run", status="running")
    session(world, tmp_path, mode=Mode.RECORD, run="record").probe(world.registry.deployment("dep_run"))
    recorded = observations(world, "dep_run")
    world.hosts["dep_run"].stop()
    replayed = session(world, tmp_path, mode=Mode.OFFLINE, run="replay").probe(world.registry.deployment("dep_run"))
    assert replayed.route is not None and replayed.route.startswith("offline replay of dep_run.json (simulator)")
    assert replayed.progress is not None and replayed.progress.previous == recorded[0]["marker"]
    assert observations(world, "dep_run") == recorded, "a replay is not an observation of the host as it is now"


def test_a_replay_without_a_transcript_says_how_to_record_one(world, tmp_path):
    world.add("dep_new")
    record = session(world, tmp_path, mode=Mode.OFFLINE).probe(world.registry.deployment("dep_new"))
    assert record.failure is not None and record.failure.kind == "no_transcript"
    assert "--gpu-mode record --deployment dep_new" in record.failure.message
    assert world.hosts["dep_new"].stats["ssh_connections"] == 0


def test_a_deployment_without_a_route_is_a_missing_input_not_an_unreachable_host(world, tmp_path):
    world.add("dep_new")
    with world.registry.update("deployments.json") as doc:
        doc["deployments"][0]["ssh"] = {"user": "root"}
    record = session(world, tmp_path).probe(world.registry.deployment("dep_new"))
    assert record.failure is not None and record.failure.kind == "no_route"
    assert "has no ssh route" in record.failure.message


def test_a_serverless_endpoint_has_no_host_to_probe(world, tmp_path):
    world.add_serverless("dep_sls")
    record = session(world, tmp_path).probe(world.registry.deployment("dep_sls"))
    assert record.not_applicable == "a serverless endpoint has no host to probe" and record.transcript is None
    assert list((tmp_path / "run-1").iterdir()) == []


def test_the_probe_record_survives_the_shared_cache(world, tmp_path):
    world.add("dep_run", status="running")
    record = session(world, tmp_path).probe(world.registry.deployment("dep_run"))
    assert ProbeRecord.from_json(json.loads(json.dumps(record.to_json()))) == record


def test_the_connection_registry_records_the_route_its_last_probe_and_an_accepted_key(registry):
    route = HostRoute(target="dep_a", host="10.0.0.5", port=2222, user="root", key_file="/keys/id_ed25519")
    record_probe(registry, route, phase="health", result="failed: unreachable")
    record_probe(registry, route, phase="health", result="exit 0", accepted_key="ssh-ed25519 SHA256:abc")
    (entry,) = registry.items("connections.json")
    assert (entry["target"], entry["kind"], entry["route"], entry["owner"]) == (
        "dep_a", "ssh", "root@10.0.0.5:2222", "gpuharness health")
    assert entry["last_probe"]["result"] == "exit 0" and entry["trust_on_first_use"] is True
    assert entry["host_key"] == "ssh-ed25519 SHA256:abc"
    assert "id_ed25519" not in json.dumps(entry), "the connection registry never holds credentials"


def test_an_offline_run_never_imports_the_ssh_stack():
    """paramiko (~0.4 s) is imported by a live probe only: loading the health plugin and its probe phase does not."""
    code = "import sys, gpuharness.pytest_plugin.health; print(sorted(m for m in sys.modules if m == 'paramiko'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_server_catalog_is_taken_once_with_the_probe_and_read_by_every_process_of_the_run(world, tmp_path):
    from gpuharness.runtimes.comfyui.workflow_fit import catalog_fetch

    host = world.add("dep_ok")
    first = ProbeSession(world.registry, Mode.LIVE, tmp_path / "cassettes", tmp_path / "run",
                         catalogs=catalog_fetch(world.registry))
    (tmp_path / "run").mkdir()
    record = first.probe(world.registry.deployment("dep_ok"))
    again = ProbeSession(world.registry, Mode.LIVE, tmp_path / "cassettes", tmp_path / "run",
                         catalogs=catalog_fetch(world.registry)).probe(world.registry.deployment("dep_ok"))
    assert again == record and record.catalog is not None and record.catalog.digest.startswith("sha256:")
    catalog = workflow_fit.catalog_of(record.catalog)
    assert catalog is not None and "KSampler" in catalog
    assert [r for r in host.runtime.requests if r.startswith("GET /object_info")] == ["GET /object_info"]
    assert not (tmp_path / "cassettes").exists(), "live mode records nothing"


def test_a_catalog_the_server_does_not_answer_is_recorded_as_why_and_replayed_so(world, tmp_path):
    from gpuharness.probe.server_catalog import CatalogUnavailable

    def refuse(deployment):
        raise CatalogUnavailable("HTTPStatusError: 500 Internal Server Error")

    world.add("dep_ok")
    recorded = ProbeSession(world.registry, Mode.RECORD, tmp_path / "cassettes", tmp_path,
                            catalogs=refuse).probe(world.registry.deployment("dep_ok"))
    assert recorded.catalog is not None and recorded.catalog.file is None
    assert recorded.catalog.error == "GET /object_info failed: HTTPStatusError: 500 Internal Server Error"
    world.hosts["dep_ok"].stop()
    (tmp_path / "replay").mkdir()
    replayed = session(world, tmp_path, mode=Mode.OFFLINE, run="replay").probe(world.registry.deployment("dep_ok"))
    assert replayed.catalog is not None and replayed.catalog.error == recorded.catalog.error


def test_a_recorded_catalog_is_scrubbed_of_secrets(world, tmp_path, monkeypatch):
    from gpuharness.runtimes.comfyui.workflow_fit import catalog_fetch

    secret = "sk-planted-secret-4242"
    monkeypatch.setenv("GPUHARNESS_TEST_SECRET", secret)
    host = world.add("dep_sec")
    (host.workspace / "models" / "checkpoints" / f"{secret}.safetensors").write_bytes(b"x")
    record = ProbeSession(world.registry, Mode.RECORD, tmp_path / "cassettes", tmp_path,
                          catalogs=catalog_fetch(world.registry)).probe(world.registry.deployment("dep_sec"))
    assert record.catalog is not None and record.catalog.file is not None
    text = Path(record.catalog.file).read_text()
    assert secret not in text and "REDACTED.safetensors" in text
    transcript = json.loads((tmp_path / "cassettes" / "ssh" / "dep_sec.json").read_text())
    assert (tmp_path / "cassettes" / "ssh" / transcript["catalog"]["file"]).samefile(record.catalog.file)
