"""Specifications of gpuharness.core.registry and statefile: validated loads, atomic locked saves."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from gpuharness.core import statefile
from gpuharness.core.errors import UserError
from gpuharness.core.registry import DEFAULT_DIR, DOCUMENTS, ENV_VAR, Registry, default_policy


def test_init_creates_every_file_with_schema_version_and_default_policy(tmp_path: Path) -> None:
    reg = Registry(tmp_path / "r")
    created = reg.init()
    assert {p.name for p in created} == {*DOCUMENTS, "jobs.jsonl", "transitions.jsonl"}
    for name in DOCUMENTS:
        assert reg.load(name)["schema_version"] == 1
    assert reg.policy_document() == default_policy()
    assert reg.ledger_path.read_bytes() == b""


def test_init_never_overwrites_existing_files(registry: Registry) -> None:
    before = registry.path("deployments.json").read_bytes()
    assert registry.init() == []
    assert registry.path("deployments.json").read_bytes() == before


def test_locate_prefers_explicit_then_env_then_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "env"))
    assert Registry.locate(tmp_path / "explicit").root == tmp_path / "explicit"
    assert Registry.locate().root == tmp_path / "env"
    monkeypatch.delenv(ENV_VAR)
    assert Registry.locate().root == Path(DEFAULT_DIR)


def test_load_reports_invalid_json_as_file_line_column(registry: Registry) -> None:
    path = registry.path("deployments.json")
    path.write_text('{\n  "schema_version": 1,\n  "deployments": [,]\n}\n')
    with pytest.raises(UserError) as caught:
        registry.load("deployments.json")
    assert caught.value.path == str(path)
    assert caught.value.place == "3:19"


def test_load_reports_schema_errors_as_json_path(registry: Registry, deployment_item) -> None:
    path = registry.path("deployments.json")
    path.write_text(json.dumps({"schema_version": 1, "deployments": [deployment_item(status="up")]}))
    with pytest.raises(UserError) as caught:
        registry.load("deployments.json")
    assert caught.value.place == "$.deployments[0].status"
    assert "nothing was changed" in (caught.value.hint or "")


def test_load_refuses_non_object_top_level(registry: Registry) -> None:
    registry.path("policy.json").write_text("[]\n")
    with pytest.raises(UserError, match="JSON object at the top level"):
        registry.load("policy.json")


def test_load_of_missing_file_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(UserError) as caught:
        Registry(tmp_path).load("deployments.json")
    assert caught.value.what == "file not found" and "gpuharness init" in (caught.value.hint or "")


def test_missing_ok_gives_the_empty_document(tmp_path: Path) -> None:
    assert Registry(tmp_path).load("machines.json", missing_ok=True) == {"schema_version": 1, "machines": []}


def test_load_of_empty_file_names_place_1_1(registry: Registry) -> None:
    registry.path("providers.json").write_bytes(b"  \n")
    with pytest.raises(UserError) as caught:
        registry.load("providers.json")
    assert caught.value.what == "file is empty" and caught.value.place == "1:1"


def test_unknown_fields_load_with_a_warning(registry: Registry, deployment_item) -> None:
    registry.path("deployments.json").write_text(
        json.dumps({"schema_version": 1, "deployments": [deployment_item(team="video")]}))
    registry.load("deployments.json")
    assert len(registry.warnings) == 1 and "team" in registry.warnings[0]
    assert "$.deployments[0]" in registry.warnings[0]


def test_update_saves_atomically_and_keeps_the_file_mode(registry: Registry, deployment_item) -> None:
    path = registry.path("deployments.json")
    os.chmod(path, 0o640)
    inode = path.stat().st_ino
    with registry.update("deployments.json") as doc:
        doc["deployments"].append(deployment_item("dep_b"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    assert path.stat().st_ino != inode  # replaced by rename, not rewritten in place
    assert [d.id for d in registry.deployments()] == ["dep_a", "dep_b"]
    assert not [p for p in path.parent.iterdir() if p.name.endswith(".tmp")]


def test_update_that_breaks_the_schema_saves_nothing(registry: Registry) -> None:
    path = registry.path("deployments.json")
    before = path.read_bytes()
    with pytest.raises(UserError), registry.update("deployments.json") as doc:
        doc["deployments"][0]["cost_hr"] = -1
    assert path.read_bytes() == before


def test_update_whose_body_raises_saves_nothing(registry: Registry) -> None:
    path = registry.path("deployments.json")
    before = path.read_bytes()
    with pytest.raises(RuntimeError), registry.update("deployments.json") as doc:
        doc["deployments"].clear()
        raise RuntimeError("the provider call failed")
    assert path.read_bytes() == before


def test_update_refuses_to_overwrite_a_broken_file(registry: Registry) -> None:
    path = registry.path("deployments.json")
    path.write_bytes(b'{"schema_version": 1, "deployments": [}')
    with pytest.raises(UserError), registry.update("deployments.json"):
        pytest.fail("the body must not run on a broken file")
    assert path.read_bytes() == b'{"schema_version": 1, "deployments": [}'


def test_new_file_is_created_world_readable(tmp_path: Path) -> None:
    statefile.atomic_write_json(tmp_path / "new.json", {"a": 1})
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644


def test_failed_atomic_write_leaves_the_old_file_and_no_temp(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    path.write_text('{"old": true}\n')
    with pytest.raises(TypeError):
        statefile.atomic_write_json(path, {"bad": object()})
    assert path.read_text() == '{"old": true}\n'
    assert [p.name for p in tmp_path.iterdir()] == ["doc.json"]


def test_deployment_and_provider_lookup(registry: Registry) -> None:
    assert registry.deployment("dep_a").cost_hr == 0.70
    assert registry.provider("vast")["kind"] == "vast"
    with pytest.raises(UserError, match="no deployment 'dep_zz'"):
        registry.deployment("dep_zz")
    with pytest.raises(UserError, match="no provider 'runpod'"):
        registry.provider("runpod")


def test_items_of_the_flat_policy_document_is_a_bug() -> None:
    with pytest.raises(KeyError):
        Registry("x").items("policy.json")


def test_non_utf8_file_names_line_and_column(registry: Registry) -> None:
    registry.path("models.json").write_bytes(b'{"schema_version": 1,\n "models": ["\xff"]}')
    with pytest.raises(UserError) as caught:
        registry.load("models.json")
    assert caught.value.place == "2:14"


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_file_is_a_user_error(registry: Registry) -> None:
    path = registry.path("models.json")
    os.chmod(path, 0)
    with pytest.raises(UserError, match="permission denied"):
        registry.load("models.json")


def test_a_huge_value_in_an_error_is_elided_to_keep_one_short_line(registry: Registry) -> None:
    registry.path("policy.json").write_text(json.dumps({"schema_version": 1, "daily_usd": "9" * 5000}))
    with pytest.raises(UserError) as caught:
        registry.load("policy.json")
    line = caught.value.line()
    assert len(line) < 1200 and " … " in line and line.count("\n") == 0
    assert "is not of type 'number'" in line


def test_update_sweeps_stale_temp_files_of_killed_writers_but_not_fresh_ones(registry: Registry) -> None:
    stale = registry.root / ".deployments.json.dead1234.tmp"
    fresh = registry.root / ".deployments.json.live5678.tmp"
    other = registry.root / ".policy.json.dead9999.tmp"
    for temp in (stale, fresh, other):
        temp.write_text("{")
    long_ago = stale.stat().st_mtime - 3600
    os.utime(stale, (long_ago, long_ago))
    os.utime(other, (long_ago, long_ago))
    with registry.update("deployments.json"):
        pass
    assert not stale.exists()
    assert fresh.exists()  # may belong to a writer still saving
    assert other.exists()  # another file's temp: swept only under that file's lock


def test_a_symlinked_state_file_stays_a_symlink(registry: Registry, tmp_path: Path, deployment_item) -> None:
    real = tmp_path / "dotfiles" / "deployments.json"
    real.parent.mkdir()
    link = registry.path("deployments.json")
    real.write_bytes(link.read_bytes())
    link.unlink()
    link.symlink_to(real)
    with registry.update("deployments.json") as doc:
        doc["deployments"].append(deployment_item("dep_b"))
    assert link.is_symlink()
    assert [d["id"] for d in json.loads(real.read_text())["deployments"]] == ["dep_a", "dep_b"]
