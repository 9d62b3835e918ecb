"""Provider inventory for the audit: recorded (offline, from cassettes) or listed live, once per session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.pytest_plugin import cassette_dir

if TYPE_CHECKING:  # the cassette reader (PyYAML) and the adapters load when a check asks for the inventory
    from gpuharness.providers import inventory as inventory_mod

INVENTORY_CASSETTE = Path("http") / "inventory.yaml"


@pytest.fixture(scope="session")
def gh_inventory_cassette(pytestconfig: pytest.Config) -> Path:
    """<cassettes>/http/inventory.yaml (record it with `gpuharness status --refresh --gpu-mode record`)."""
    return cassette_dir(pytestconfig) / INVENTORY_CASSETTE


@pytest.fixture(scope="session")
def gh_inventory(gpu_mode: str, gh_registry: Registry, gh_inventory_cassette: Path) -> inventory_mod.Inventory:
    """The provider inventory the audit judges the registry against: one list call (plus pages) per provider."""
    from gpuharness.providers import cassette
    from gpuharness.providers import inventory as inventory_mod

    path = gh_inventory_cassette
    mode = cassette.Mode.parse(gpu_mode)
    try:
        if mode is cassette.Mode.OFFLINE:
            if not path.exists():
                pytest.skip(f"no recorded inventory at {path}; record one with `gpuharness status --refresh "
                            f"--gpu-mode record --cassette {path}`")
            recorded_for = inventory_mod.recorded_registry(path)
            if recorded_for is not None and recorded_for != gh_registry.root.resolve():
                pytest.skip(f"{path} was recorded for the registry {recorded_for}, not {gh_registry.root}; "
                            "pass --cassettes DIR holding this registry's inventory")
        return inventory_mod.current(gh_registry, mode, path)
    except UserError as exc:
        pytest.fail(exc.line(), pytrace=False)
