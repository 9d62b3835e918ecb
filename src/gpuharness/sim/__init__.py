"""The loopback provider simulator: RunPod v2 + Serverless, Vast.ai and Massed Compute wire formats."""

from gpuharness.sim.server import Simulator, require_loopback
from gpuharness.sim.state import HostFactory, HostHandle, PlaceholderHost, SimInstance, SimState

__all__ = ["HostFactory", "HostHandle", "PlaceholderHost", "SimInstance", "SimState", "Simulator",
           "require_loopback"]
