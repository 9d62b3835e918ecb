"""Provider capabilities live on the adapters, and so does each kind: the adapters make the provider table, which the
schema and the default policy read; the lifecycle asks the capabilities, never a kind's name."""

from __future__ import annotations

import ast

import pytest
from checkout import ROOT

from gpuharness.core import schema
from gpuharness.core.errors import UserError
from gpuharness.core.registry import default_policy
from gpuharness.providers.base import ADAPTERS, InventorySource, ProviderKind
from gpuharness.providers.factory import capabilities_of, kind_of
from gpuharness.providers.inventory import listed_providers
from gpuharness.providers.vast import VastAi

SRC = ROOT / "src" / "gpuharness"


def test_a_kind_is_parsed_once_and_a_typo_is_one_line_naming_the_kinds():
    assert ProviderKind.parse("vast") is VastAi.kind
    with pytest.raises(UserError) as caught:
        kind_of({"name": "gpu-box", "kind": "vasst"})
    line = caught.value.line()
    assert "gpu-box.kind" in line and "unknown kind 'vasst'" in line and "vast" in line and "\n" not in line


def test_every_kind_has_one_adapter_declaring_its_capabilities():
    assert sorted(ADAPTERS) == sorted(["runpod", "runpod-serverless", "vast", "massed", "owned"])  # import order
    for kind, adapter in ADAPTERS.items():
        assert adapter.kind.value == kind and capabilities_of({"kind": kind}) is adapter.capabilities


def test_the_schema_and_the_default_policy_know_every_kind_from_the_table():
    entry = schema.load_schema("providers")["properties"]["providers"]["items"]["properties"]["kind"]
    assert entry["enum"] == list(ADAPTERS) == default_policy()["allowed_providers"]
    written = (SRC / "core" / "schemas" / "providers.schema.json").read_text("utf-8")
    assert not any(f'"{kind}"' in written for kind in ADAPTERS), "the schema file names a kind: read the table"


def test_only_providers_with_an_instance_list_are_listed():
    entries = [{"name": kind, "kind": kind} for kind in ADAPTERS]
    listed = {e["kind"] for e in listed_providers(entries)}
    assert listed == {k for k, a in ADAPTERS.items() if a.capabilities.inventory is InventorySource.API}
    assert listed == {"runpod", "vast", "massed"}


def test_a_serverless_provider_has_no_ssh_no_instances_and_rents_nothing_by_the_hour():
    serverless = capabilities_of({"kind": "runpod-serverless"})
    assert serverless.serverless and not serverless.ssh and not serverless.rents
    assert serverless.inventory is InventorySource.NONE


def _kind_literals(source: str) -> list[int]:
    """Lines comparing something with a provider kind's name (`kind == "vast"`, `kind in ("owned", ...)`)."""
    kinds = set(ADAPTERS)

    def names_a_kind(node: ast.expr) -> bool:
        if isinstance(node, ast.Constant):
            return node.value in kinds
        return isinstance(node, (ast.Tuple, ast.Set, ast.List)) and any(names_a_kind(e) for e in node.elts)

    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Compare) and any(names_a_kind(c) for c in [node.left, *node.comparators])]


def test_the_kind_name_finder_finds_a_comparison():
    assert _kind_literals('if kind == "vast":\n    pass\nok = kind in ("owned", "x")\n') == [1, 3]


@pytest.mark.parametrize("package", ["operations", "plans", "cli", "providers", "pytest_plugin", "demo", "core"])
def test_the_lifecycle_compares_no_kind_names(package):
    found = [f"{path.relative_to(SRC)}:{line}" for path in sorted((SRC / package).rglob("*.py"))
             for line in _kind_literals(path.read_text("utf-8"))]
    assert found == [], "ask the adapter's capabilities instead: " + "; ".join(found)
