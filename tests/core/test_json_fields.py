"""A record's JSON form derived from its fields: each under its own name, nested records likewise, tuples as
lists, the same as the hand-written form it replaces."""

from __future__ import annotations

import json
from dataclasses import asdict

from gpuharness.core.policy import Decision
from gpuharness.diagnose.diagnosis import Diagnosis, Evidence
from gpuharness.providers.base import Instance, SshEndpoint


def test_nested_records_and_tuples_encode_as_json_reads_them_back():
    diagnosis = Diagnosis("oom", 3, "CUDA out of memory", "smaller batch", False, "oom", "log", 10,
                          (Evidence("oom", 3, "CUDA out of memory", True),))
    encoded = diagnosis.to_json()
    assert encoded["evidence"] == [{"label": "oom", "line_no": 3, "line": "CUDA out of memory", "strong": True}]
    assert json.loads(json.dumps(encoded)) == encoded


def test_the_derived_form_is_the_dataclass_form():
    instance = Instance("vast", "7", "running", "running", gpu="RTX 4090", ssh=SshEndpoint("h", 22, "root"),
                        labels={"gh_key": "gh-dep_a"})
    assert instance.to_json() == json.loads(json.dumps(asdict(instance)))
    decision = Decision(False, "daily_usd", 50.0, 51.0, "over", ("daily_usd",))
    assert list(decision.to_json()) == ["allowed", "ceiling", "limit", "projected", "reason", "checked"]
