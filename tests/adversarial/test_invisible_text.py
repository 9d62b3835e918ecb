"""Text that looks like nothing is nothing: an owner or reason made only of whitespace, controls, format characters
(zero-width space U+200B, word joiner U+2060, bidi marks) or line and paragraph separators names nobody, and none of
those characters reaches a terminal raw."""

from __future__ import annotations

import json
import tempfile
import unicodedata
from dataclasses import replace
from datetime import datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import build_deployment
from gpuharness.audit import rules
from gpuharness.audit.run import run_audit
from gpuharness.core.clock import parse_ts
from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.stewardship import missing_steward
from gpuharness.core.terminal import escape
from gpuharness.demo.simulated_estate import SimulatedEstate
from gpuharness.operations.provision import ProvisionRequest, stewarded

NOW: datetime = parse_ts("2026-11-02T12:00:00Z")
#: what prints as nothing: spaces, controls, format characters (Cf), line and paragraph separators
INVISIBLE = ("Zs", "Cc", "Cf", "Zl", "Zp")
#: raw in a terminal's output, these would hide, reorder or break what is shown (newline and tab are kept as text)
NEVER_RAW = ("Cc", "Cf", "Zl", "Zp", "Cs")

nothing = st.text(st.characters(categories=INVISIBLE), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(owner=nothing, reason=nothing)
def test_an_owner_and_reason_made_of_invisible_characters_name_nobody(owner: str, reason: str) -> None:
    deployment = Deployment.from_json(build_deployment("dep_ghost", owner=owner, reason=reason))
    assert missing_steward(deployment) == ("owner", "reason")


@settings(max_examples=200, deadline=None)
@given(owner=nothing, word=st.text(st.characters(categories=("L", "N")), min_size=1, max_size=8))
def test_visible_text_among_invisible_characters_still_names_someone(owner: str, word: str) -> None:
    deployment = Deployment.from_json(build_deployment("dep_named", owner=owner + word, reason=word + owner))
    assert missing_steward(deployment) == ()


@settings(max_examples=100, deadline=None)
@given(owner=nothing)
def test_provision_refuses_an_invisible_owner_and_never_records_an_invisible_reason(owner: str) -> None:
    request = ProvisionRequest(provider="vast", gpu="RTX 4090", image="comfyui:1", cost_hr=0.4,
                               workflow="h3-text-to-image", owner=owner)
    with pytest.raises(UserError, match="cleanup owner"):
        stewarded(request)
    kept = stewarded(replace(request, owner="ana", reason=owner))
    assert kept.reason == "run h3-text-to-image on 1 x RTX 4090"


@settings(max_examples=30, deadline=None)
@given(owner=nothing, reason=nothing)
def test_the_audit_finds_a_deployment_stewarded_by_invisible_text_unstewarded(owner: str, reason: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        # written by hand, as a person or an agent may: the audit reads what anyone wrote
        root = Path(directory) / "registry"
        Registry(root).init()
        record = build_deployment("dep_ghost", owner=owner, reason=reason)
        (root / "deployments.json").write_text(json.dumps({"schema_version": 1, "deployments": [record]}))
        run = run_audit(root, NOW, use_checkpoint=False)
    found = [f for f in run.findings[rules.SHUTDOWN_STEWARD] if f.subject == "dep_ghost"]
    assert len(found) == 1 and "no owner and no reason" in found[0].message, run.findings[rules.SHUTDOWN_STEWARD]


def test_a_live_paid_deployment_cannot_be_written_with_a_zero_width_owner(registry: Registry) -> None:
    with pytest.raises(UserError, match="refused for live paid deployment dep_zw"):
        with registry.update("deployments.json") as document:
            document["deployments"].append(build_deployment("dep_zw", owner="\u200b\u2060", reason="renders"))
    assert [d.id for d in registry.deployments()] == ["dep_a"]


def test_provision_on_the_command_line_refuses_a_zero_width_owner(tmp_path: Path) -> None:
    with SimulatedEstate(tmp_path / "lab", say=lambda line: None) as lab:
        result = lab.cli("provision", "--provider", "vast", "--gpu", "RTX 4090", "--image", "comfyui:1", "--cost-hr",
                         "0.40", "--idle-minutes", "15", "--owner", "\u200b\u2060", "--registry",
                         str(lab.registry.root))
        assert result.returncode == 2 and "cleanup owner" in result.stderr, result.stderr
        assert sum(lab.sim.stats()["requests"].values()) == 0 and lab.registry.deployments() == []


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(categories=(*INVISIBLE, "Cs", "L", "P")), max_size=40))
def test_escape_never_lets_an_invisible_character_through_raw(text: str) -> None:
    shown = escape(text)
    raw = [c for c in shown if unicodedata.category(c) in NEVER_RAW and c not in "\n\t"]
    assert raw == [], f"{[f'U+{ord(c):04X}' for c in raw]} reached the terminal raw"
    assert escape(shown) == shown  # what it shows is plain text: escaping again changes nothing


@pytest.mark.parametrize(("raw", "shown"), [("\u200b", "\\u200b"), ("\u2060", "\\u2060"), ("\u2028", "\\u2028"),
                                            ("\u2029", "\\u2029"), ("\ufeff", "\\ufeff"), ("\u00ad", "\\xad"),
                                            ("\U000e0041", "\\U000e0041")])
def test_escape_shows_the_issues_examples(raw: str, shown: str) -> None:
    assert escape(f"owner:{raw}ana") == f"owner:{shown}ana"
