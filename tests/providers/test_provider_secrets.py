"""A planted GPUHARNESS_TEST_SECRET used as the API key ends up in no cassette, log or report."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gpuharness.providers import cassette
from gpuharness.providers.base import LaunchSpec, ProviderError
from gpuharness.providers.factory import build_provider
from gpuharness.providers.mutation import launch_reconciled, terminate_reconciled
from gpuharness.sim import Simulator

PLANTED = "GPUHARNESS_TEST_SECRET-planted-3e7c1a9f0b5d"


def test_recording_the_lifecycle_with_a_planted_key_leaves_it_nowhere(tmp_path: Path, monkeypatch, caplog):
    monkeypatch.setenv(cassette.TEST_SECRET_ENV, PLANTED)
    monkeypatch.setenv("VAST_KEY", PLANTED)
    caplog.set_level(logging.DEBUG)
    log_file = tmp_path / "run.log"
    handler = logging.FileHandler(log_file)
    handler.setLevel(logging.DEBUG)
    logging.getLogger().addHandler(handler)
    journal: list[dict] = []
    cassette_path = tmp_path / "cassettes" / "vast-lifecycle.yaml"
    try:
        with Simulator(ready_delay_s=0.0, log=logging.getLogger("sim").info) as sim:
            entry = {"name": "vast", "kind": "vast", "credential_env": "VAST_KEY", "api_base": sim.url("vast")}
            with cassette.use(cassette_path, cassette.Mode.RECORD,
                              secrets=cassette.secret_values(["VAST_KEY"])):
                vast = build_provider(entry)
                created = launch_reconciled(vast, LaunchSpec(gpu="RTX 4090", image="img", idempotency_key="gh-s1"),
                                            journal.append)
                vast.get_instance(created.id)
                assert terminate_reconciled(vast, created.id, journal.append)
                sim.api_keys["vast"] = "another-key-entirely-0123456789"
                with pytest.raises(ProviderError) as refused:
                    vast.list_instances()
    finally:
        logging.getLogger().removeHandler(handler)
        handler.close()
    recorded = cassette_path.read_text()
    assert "/vast/api/v0/asks/" in recorded  # the launch was recorded...
    everything = [recorded, log_file.read_text(), caplog.text, str(refused.value), repr(journal)]
    for text in everything:
        assert PLANTED not in text  # ...and the key is nowhere
    assert "Bearer" not in recorded or "REDACTED" in recorded
