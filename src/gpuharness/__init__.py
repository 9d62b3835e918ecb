"""gpuharness: verify, audit and operate rented GPU workloads kept in plain JSON under .pi/gpu/."""

from gpuharness.core.economics import KeepAliveDecision, keep_alive
from gpuharness.core.errors import UserError
from gpuharness.core.ledger import Ledger
from gpuharness.core.lifecycle import ALLOWED, STATES, transition
from gpuharness.core.policy import Action, Decision, Policy
from gpuharness.core.registry import Registry

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

__version__ = "0.1.0"
