"""gpuharness: verify, audit and operate rented GPU workloads kept in plain JSON under .pi/gpu/."""

import importlib
from typing import Final

from gpuharness.core import tables
from gpuharness.core.economics import KeepAliveDecision, keep_alive
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import ALLOWED, STATES, transition
from gpuharness.core.policy import Action, Decision, Policy
from gpuharness.core.registry import Registry
from gpuharness.core.version import __version__ as __version__

__all__ = [
    "ALLOWED",
    "STATES",
    "Action",
    "Decision",
    "KeepAliveDecision",
    "Ledger",
    "Policy",
    "Registry",
    "UserError",
    "keep_alive",
    "transition",
]

#: The built-in runtimes and provider adapters, named once here as pytest's config names its default plugins. Each
#: module declares its own table entries (core.tables); the tables import these the first time one is read, so
#: importing gpuharness stays cheap. A new runtime or provider adds its module here.
BUILTIN: Final = (
    "gpuharness.providers.runpod",
    "gpuharness.providers.serverless",
    "gpuharness.providers.vast",
    "gpuharness.providers.massed",
    "gpuharness.providers.owned",
    "gpuharness.runtimes.comfyui.client",
    "gpuharness.runtimes.openai",
    "gpuharness.runtimes.native",
    "gpuharness.runtimes.serverless",
)


def _import_builtin() -> None:
    for name in BUILTIN:
        importlib.import_module(name)


tables.load_builtins_with(_import_builtin)
