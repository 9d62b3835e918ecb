"""gpuharness: verify, audit and operate rented GPU workloads kept in plain JSON under .pi/gpu/."""

from gpuharness.economics import KeepAliveDecision, keep_alive
from gpuharness.errors import UserError
from gpuharness.ledger import Ledger
from gpuharness.lifecycle import ALLOWED, STATES, transition
from gpuharness.policy import Action, Decision, Policy
from gpuharness.registry import Registry

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
