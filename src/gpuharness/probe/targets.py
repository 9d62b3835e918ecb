"""What the health probe and checks look at on a deployment, derived from its Deployment, each in one place."""

from __future__ import annotations

from typing import Any, Final

from gpuharness.core.deployment import Deployment
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.core.runtimes import RUNTIMES
from gpuharness.probe.script import ProbeTargets

#: The manifests a deployment names its model and workflow in.
MANIFESTS: Final = ("models.json", "workflows.json")
#: each runtime's default service process pattern and port (core.runtimes, where both are declared)
RUNTIME_DEFAULTS: Final[dict[str, tuple[str, int]]] = {
    name: (runtime.process, runtime.port) for name, runtime in RUNTIMES.items()
    if runtime.process is not None and runtime.port is not None}


def service_process(deployment: Deployment) -> str | None:
    """The pattern the service's process matches: `process`, else the runtime's default."""
    return deployment.process or RUNTIME_DEFAULTS.get(str(deployment.runtime), (None, None))[0]


def service_port(deployment: Deployment) -> int | None:
    """The port the service listens on: `service_port`, else the runtime's default."""
    return deployment.service_port or RUNTIME_DEFAULTS.get(str(deployment.runtime), (None, None))[1]


def probe_targets(deployment: Deployment, policy: Policy) -> ProbeTargets:
    """What the probe looks at on the deployment's host."""
    return ProbeTargets(workspace=deployment.workspace, process_pattern=service_process(deployment),
                        service_port=service_port(deployment), log_path=deployment.log_path,
                        checkpoint_path=deployment.checkpoint_path,
                        nvidia_smi_timeout_s=policy.health_timeouts.nvidia_smi_s,
                        runtime_python=deployment.runtime_python)


def probe_deadline_s(policy: Policy) -> float:
    """The probe phase's deadline (`health_timeouts.probe_s`): the probe's exec and the server catalog's fetch each
    end by it."""
    return policy.health_timeouts.probe_s


def manifest(registry: Registry, file_name: str, key: str, value: Any) -> dict[str, Any] | None:
    """The highest version of the manifest whose `key` is `value` (models.json by name, workflows.json by id);
    None when none has it. A manifest file that does not read is a UserError naming the file and the field."""
    if not value:
        return None
    items = registry.items(file_name)
    matches = [item for item in items if item.get(key) == value]
    return max(matches, key=lambda item: int(item.get("version", 0))) if matches else None
