"""The provider wires the simulator serves: the WIRE of every sim/providers_*.py module, found by that name (as
pytest finds test_*.py), so a new provider's simulator is that one module. A path is served by the wire with the
longest prefix that holds it (/runpod/graphql before /runpod)."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path
from typing import Final

from gpuharness.core import tables
from gpuharness.sim.routing import ProviderWire

#: what a provider's simulator module is called: sim/providers_<name>.py
MODULE_PREFIX: Final = "providers_"


def discover(directory: Path, package: str) -> tuple[ProviderWire, ...]:
    """The WIRE of every providers_*.py module of a package (its directory and its dotted name), the longest
    prefix first."""
    names = sorted(m.name for m in pkgutil.iter_modules([str(directory)]) if m.name.startswith(MODULE_PREFIX))
    wires = []
    for name in names:
        wire = getattr(importlib.import_module(f"{package}.{name}"), "WIRE", None)
        if not isinstance(wire, ProviderWire):
            raise TypeError(f"{package}.{name} declares no ProviderWire as WIRE")
        wires.append(wire)
    return tuple(sorted(wires, key=lambda wire: -len(wire.prefix)))


#: every wire the simulator serves, the longest prefix first
WIRES: Final = discover(Path(__file__).parent, __package__ or "gpuharness.sim")


def wire_for(path: str) -> ProviderWire | None:
    """The provider wire serving a path (the longest prefix wins: /runpod/graphql before /runpod)."""
    return next((w for w in WIRES if path == w.prefix or path.startswith(w.prefix + "/")), None)


def providers() -> tuple[ProviderWire, ...]:
    """One wire per simulated provider, its own (a nested API, such as GraphQL under /runpod, shares its
    provider's base), in the order of the provider table's kinds."""
    kinds = tables.names(tables.PROVIDER_KINDS)
    return tuple(sorted((w for w in WIRES if w.prefix.count("/") == 1),
                        key=lambda w: (kinds.index(w.provider) if w.provider in kinds else len(kinds), w.provider)))


def provider(name: str) -> ProviderWire | None:
    """The simulated provider called name (its own wire), or None."""
    return next((w for w in providers() if w.provider == name), None)


def keeping_instances() -> tuple[ProviderWire, ...]:
    """The simulated providers whose instances the simulator keeps (made directly or copied in)."""
    return tuple(w for w in providers() if w.made is not None)
