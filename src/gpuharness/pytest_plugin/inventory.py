"""Provider inventory and the providers' bills for the audit: recorded (offline, from cassettes) or read live,
once per session."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.pytest_plugin import cassette_dir

if TYPE_CHECKING:  # the cassette reader (PyYAML) and the adapters load when a check asks for the inventory
    from gpuharness.providers import bill as bill_mod
    from gpuharness.providers import inventory as inventory_mod

INVENTORY_CASSETTE = Path("http") / "inventory.yaml"
BILL_CASSETTE = Path("http") / "bill.yaml"


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


@pytest.fixture(scope="session")
def gh_bill_cassette(pytestconfig: pytest.Config) -> Path:
    """<cassettes>/http/bill.yaml (record it with `gpuharness bill --gpu-mode record`)."""
    return cassette_dir(pytestconfig) / BILL_CASSETTE


@pytest.fixture(scope="session")
def gh_bill(gpu_mode: str, gh_registry: Registry, gh_bill_cassette: Path) -> bill_mod.Bill:
    """The providers' own bills the audit compares the registry's billed intervals with: one read per provider,
    offline a recorded provider call like any other (the window is the recorded one)."""
    from gpuharness.core.clock import utcnow
    from gpuharness.providers import bill as bill_mod
    from gpuharness.providers import cassette
    from gpuharness.providers import inventory as inventory_mod

    path = gh_bill_cassette
    mode = cassette.Mode.parse(gpu_mode)
    try:
        if mode is cassette.Mode.OFFLINE:
            if not path.exists():
                pytest.skip(f"no recorded bill at {path}; record one with `gpuharness bill --gpu-mode record "
                            f"--cassette {path}`")
            recorded_for = inventory_mod.recorded_registry(path)
            if recorded_for is not None and recorded_for != gh_registry.root.resolve():
                pytest.skip(f"{path} was recorded for the registry {recorded_for}, not {gh_registry.root}; "
                            "pass --cassettes DIR holding this registry's bill")
        now = utcnow()
        return bill_mod.current_bill(gh_registry, mode, path, now - bill_mod.AUDIT_WINDOW, now)
    except UserError as exc:
        pytest.fail(exc.line(), pytrace=False)
