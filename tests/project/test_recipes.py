"""Each recipe of docs/package-map.md (adding a runtime, a provider, an audit rule) is held to the tree:
the files it lists are as many as it says, every existing runtime, provider and audit rule lives in exactly those
files (and names itself nowhere else but where a reason is given here), and a throwaway provider made of only the
files the recipe lists is built, validated, allowed and served like the real ones."""

from __future__ import annotations

import inspect
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from checkout import ROOT

import gpuharness
from gpuharness.audit import rules
from gpuharness.core import schema
from gpuharness.core.registry import default_policy
from gpuharness.core.runtimes import RUNTIMES
from gpuharness.operations.seams import executor_of
from gpuharness.providers.base import ADAPTERS, Capabilities, Instance, InventorySource, ProviderKind, adapter
from gpuharness.providers.factory import PhaseOptions, build_provider, capabilities_of
from gpuharness.sim import Simulator, wires
from gpuharness.sim.simulated_runtime import half_of

SRC = ROOT / "src" / "gpuharness"
README = (ROOT / "docs" / "package-map.md").read_text("utf-8")

#: files that name a provider kind for a reason of their own (a new provider touches none of them): the demo's and
#: the recorded world's example estates, a log's source (diagnose), the simulated instance ids (Vast's are numbers,
#: Massed's uuids, every other provider's RunPod-like), and Vast's and RunPod's simulators, split in helper modules
PROVIDER_STILL_NAMING = frozenset({"demo/simulated_estate.py", "demo/tour.py", "demo/stops_itself.py",
                                   "plans/recorded_world.py",
                                   "diagnose/diagnosis.py", "sim/state.py", "sim/vast_account.py",
                                   "sim/vast_listing.py", "sim/providers_runpod_graphql.py"})
#: audit rules judged, besides the recipe's three files, somewhere else for a reason of their own
AUDIT_RULES_ALSO_IN = {
    # the sequence of a job's lines is judged across the ledger's split as well (the parallel tail)
    "job:only-corrections-after-terminal": {"src/gpuharness/audit/ledger_split.py"},
    # the roots scanned for secrets are the suite's options (--cassettes, the reports folder): the plugin hands
    # audit/run.py each root with its rule
    "secrets:cassettes": {"src/gpuharness/pytest_plugin/audit.py"},
    "secrets:reports": {"src/gpuharness/pytest_plugin/audit.py"},
    # the plugin's docs name it as the example of @pytest.mark.audit_rule
    "ledger:schema": {"src/gpuharness/pytest_plugin/audit.py"},
}
#: audit rules no engine module names: the inventory's (judged by operations.reconcile in the check itself), the
#: provider's bill (judged by core.bill in the check itself) and the secret scans of roots the plugin hands the
#: engine, each with its rule
EMITTED_UNNAMED = frozenset({rules.INVENTORY_ORPHANS.id, rules.INVENTORY_VANISHED.id, rules.SECRETS_CASSETTES.id,
                             rules.SECRETS_REPORTS.id, rules.BILL_MATCHES.id})


def recipe(title: str) -> tuple[list[int], list[str]]:
    """The counts a README recipe claims ("touches 3 files, 4 if ...") and the source files it lists."""
    found = re.search(rf"\*\*Adding {title}\*\* (.*?)(?:\n\n|\Z)", README, re.DOTALL)
    assert found, f"docs/package-map.md has no recipe **Adding {title}**"
    text = " ".join(found.group(1).split())
    counts = [int(n) for n in re.match(r"touches (\d+) files(?:, (\d+) if)?", text).groups() if n]  # type: ignore[union-attr]
    listed = [token for token in re.findall(r"`([^`]+)`", text)
              if "/" in token and not token.startswith("tests/") and (token.endswith((".py", "/")))]
    return counts, listed


def _literal(name: str) -> re.Pattern[str]:
    return re.compile(rf"[\"']{re.escape(name)}[\"']")


def _files_naming(pattern: re.Pattern[str]) -> set[str]:
    return {path.relative_to(SRC).as_posix() for path in SRC.rglob("*.py") if pattern.search(path.read_text("utf-8"))}


# --- adding a runtime


def test_the_runtime_recipe_lists_its_homes_and_counts_them():
    counts, listed = recipe("a runtime")
    assert listed == ["runtimes/", "gpuharness/__init__.py", "sim/<runtime>.py", "operations/<runtime>_job.py"]
    assert counts == [3, 4] and counts[1] == len(listed) <= 4


@pytest.mark.parametrize("name", list(RUNTIMES))
def test_every_runtime_lives_in_the_homes_the_recipe_lists(name):
    declaring = [path.relative_to(SRC).as_posix() for path in (SRC / "runtimes").rglob("*.py")
                 if re.search(rf"Runtime\(\s*[\"']{name}[\"']", path.read_text("utf-8"))]
    assert len(declaring) == 1, f"runtime {name!r} is declared in {declaring}, not in one module of runtimes/"
    module = "gpuharness." + declaring[0].removesuffix(".py").replace("/", ".")
    assert module in gpuharness.BUILTIN
    homes = {declaring[0], f"sim/{name}.py", f"operations/{name}_job.py"}
    assert (half_of(name) is not None) == (SRC / f"sim/{name}.py").is_file()
    assert (executor_of(name) is not None) == (SRC / f"operations/{name}_job.py").is_file()
    from test_runtime_table import STILL_NAMING

    naming = _files_naming(_literal(name)) - STILL_NAMING
    assert naming <= homes, f"runtime {name!r} is named outside the recipe's files: {sorted(naming - homes)}"


# --- adding a provider


def test_the_provider_recipe_lists_its_homes_and_counts_them():
    counts, listed = recipe("a provider")
    assert listed == ["providers/", "gpuharness/__init__.py", "sim/providers_<name>.py"]
    assert counts == [len(listed)] and len(listed) <= 4


@pytest.mark.parametrize("kind", list(ADAPTERS))
def test_every_provider_lives_in_the_homes_the_recipe_lists(kind):
    adapter_class = ADAPTERS[kind]
    module = adapter_class.__module__
    assert module.startswith("gpuharness.providers.") and module in gpuharness.BUILTIN
    homes = {inspect.getfile(adapter_class).split("/gpuharness/", 1)[1]}
    simulated = [w for w in wires.WIRES if w.provider == kind]
    assert bool(simulated) == (adapter_class.capabilities.api_base is not None), "a provider with an API is simulated"
    homes |= {inspect.getfile(sys.modules[_module_of(w)]).split("/gpuharness/", 1)[1] for w in simulated}
    assert all(re.fullmatch(r"sim/providers_\w+\.py", home) for home in homes if home.startswith("sim/"))
    naming = _files_naming(_literal(kind)) - PROVIDER_STILL_NAMING
    assert naming <= homes, f"provider {kind!r} is named outside the recipe's files: {sorted(naming - homes)}"


def _module_of(wire: wires.ProviderWire) -> str:
    return next(name for name, module in sys.modules.items()
                if name.startswith("gpuharness.sim.providers_") and getattr(module, "WIRE", None) is wire)


TOY_KIND = "toy-cloud"
#: the throwaway provider's simulator module, as a new provider's sim/providers_<name>.py is written
TOY_SIM = '''
from gpuharness.sim.routing import Made, ProviderWire, Route, json_response


def list_instances(req, state):
    rows = [i for (provider, _), i in state.instances.items() if provider == "toy-cloud"]
    return json_response(200, {"machines": [{"id": i.id, "name": i.name, "gpu": i.gpu, "price": i.cost_hr}
                                            for i in rows]})


WIRE = ProviderWire(
    provider="toy-cloud", prefix="/toycloud",
    routes=(Route.of("GET", "/toycloud/machines", "read", list_instances),),
    unauthorized=lambda: json_response(401, {"error": "who are you"}),
    rate_limited=lambda retry_after: json_response(429, {"error": "slow down"}),
    capacity=lambda: json_response(503, {"error": "sold out"}),
    server_error=lambda: json_response(500, {"error": "oops"}),
    not_found=lambda: json_response(404, {"error": "no such route"}),
    made=lambda row, name: Made(row.display, 1.25, {"rack": "r1"}),
    mirrored=lambda label: {"rack": "r1"},
)
'''


def _toy_adapter() -> type:
    """The throwaway provider's adapter module's class, as a new provider's providers/<name>.py declares it."""

    @adapter
    class ToyCloud:
        kind: ClassVar[ProviderKind] = ProviderKind(TOY_KIND)
        capabilities = Capabilities(label="toy machine", api_base="https://api.toy-cloud.invalid", stop_start=False,
                                    interruptible=False, bid_price=False, serverless=False, ssh=True,
                                    inventory=InventorySource.API, offers=False, rents=True)

        def __init__(self, name: str, http: Any) -> None:
            self.name, self.http = name, http

        def list_instances(self) -> list[Instance]:
            rows = self.http.read("GET", "/machines").json()["machines"]
            return [Instance(provider=self.name, id=r["id"], status="running", name=r["name"], gpu=r["gpu"],
                             cost_hr=r["price"]) for r in rows]

        def close(self) -> None:
            self.http.close()

    return ToyCloud


@pytest.fixture
def toy_provider(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[type]:
    """A provider made of only what the recipe lists: its adapter class (declared here) and its simulator module
    (a providers_<name>.py file, found by the simulator's discovery)."""
    package = tmp_path / "toysim"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "providers_toy_cloud.py").write_text(textwrap.dedent(TOY_SIM))
    monkeypatch.syspath_prepend(str(tmp_path))
    found = wires.discover(package, "toysim")
    monkeypatch.setattr(wires, "WIRES", tuple(sorted((*wires.WIRES, *found), key=lambda w: -len(w.prefix))))
    toy = _toy_adapter()
    try:
        yield toy
    finally:
        del ADAPTERS[TOY_KIND]
        for name in [name for name in sys.modules if name == "toysim" or name.startswith("toysim.")]:
            monkeypatch.delitem(sys.modules, name)


def test_a_provider_made_only_of_the_recipes_files_is_parsed_validated_allowed_built_and_simulated(
        toy_provider, monkeypatch):
    assert ProviderKind.parse(TOY_KIND) is toy_provider.kind
    assert TOY_KIND in default_policy()["allowed_providers"]
    entry = {"name": "toys", "kind": TOY_KIND, "credential_env": "TOY_KEY"}
    assert schema.check("providers", {"schema_version": 1, "providers": [entry]}) == ([], [])
    assert capabilities_of(entry) is toy_provider.capabilities
    monkeypatch.setenv("TOY_KEY", "toy-key-0123456789abcdef")
    with Simulator(ready_delay_s=0.0) as sim:
        [served] = [e for e in sim.provider_entries("TOY_KEY") if e["kind"] == TOY_KIND]
        assert served["api_base"] == sim.url(TOY_KIND)
        ids = sim.create_instances(TOY_KIND, 2, name_prefix="gh-toy-")
        provider = build_provider({**entry, "api_base": served["api_base"]},
                                  options=PhaseOptions(deadline_s=30, timeout_s=10))
        try:
            listed = provider.list_instances()
        finally:
            provider.close()
    assert sorted(i.id for i in listed) == sorted(ids) and {i.cost_hr for i in listed} == {1.25}


def test_an_unknown_kind_is_still_refused_in_one_line_naming_the_kinds():
    with pytest.raises(gpuharness.UserError) as refused:
        ProviderKind.parse(TOY_KIND, place="toys.kind")
    line = refused.value.line()
    assert f"unknown kind '{TOY_KIND}'" in line and ", ".join(ADAPTERS) in line and "\n" not in line
    errors, _ = schema.check("providers", {"schema_version": 1, "providers": [{"name": "x", "kind": TOY_KIND}]})
    assert [e.json_path for e in errors] == ["$.providers[0].kind"]


# --- adding an audit rule

ENGINES = {"src/gpuharness/audit/run.py", "src/gpuharness/audit/ledger_pass.py"}


def test_the_audit_rule_recipe_lists_its_files_and_counts_them():
    counts, listed = recipe("an audit rule")
    assert listed == ["audit/rules.py", "audit/run.py", "audit/ledger_pass.py", "checks/audit/test_<family>.py"]
    assert counts == [3]  # its Rule, one of the two engines, one check


def _names_of(rule: rules.Rule) -> set[str]:
    """The names audit/rules.py binds the rule to: its own constant and the groups it belongs to."""
    found = set()
    for name, value in vars(rules).items():
        if not name.isupper():
            continue
        members = value.values() if isinstance(value, dict) else value if isinstance(value, tuple) else (value,)
        if any(member is rule for member in members):
            found.add(name)
    return found


@pytest.mark.parametrize("rule", list(rules.AUDIT_RULES), ids=lambda rule: rule.id)
def test_every_audit_rule_lives_in_the_files_the_recipe_lists(rule):
    pattern = re.compile(r"\brules\.(" + "|".join(sorted(_names_of(rule))) + r")\b")
    naming = {path.relative_to(ROOT).as_posix() for base in (SRC, ROOT / "checks") for path in base.rglob("*.py")
              if path != SRC / "audit" / "rules.py" and pattern.search(path.read_text("utf-8"))}
    checks = {path for path in naming if path.startswith("checks/audit/test_")}
    engines = naming & ENGINES
    assert len(checks) == 1, f"{rule.id} is asserted by {sorted(checks)}: one check names it"
    if rule.id in EMITTED_UNNAMED:
        assert engines == set(), rule.id
    else:
        assert len(engines) == 1, f"{rule.id} is emitted by {sorted(engines)}: one engine module emits it"
    also = naming - checks - engines
    assert also == AUDIT_RULES_ALSO_IN.get(rule.id, set()), f"{rule.id} is named outside the recipe's files"
