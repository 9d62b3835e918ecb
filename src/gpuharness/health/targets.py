"""What the health probe and checks look at on a deployment, derived from its registry record, each in one place
(the health code reads records as dicts; the facts the Deployment owns come from it)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from gpuharness.core.deployment import Deployment
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.health.probe import ProbeTargets
from gpuharness.health.rules import RUNTIME_DEFAULTS

#: The manifests a deployment names its model and workflow in.
MANIFESTS: Final = ("models.json", "workflows.json")


def workspace(deployment: Mapping[str, Any]) -> str:
    """The directory on the host whose free disk the model needs: the Deployment's one workspace."""
    return Deployment.from_json(deployment).workspace


def is_serverless(deployment: Mapping[str, Any]) -> bool:
    """A serverless endpoint with no host of ours to probe: judged on its endpoint and its test job only."""
    return Deployment.from_json(deployment).is_serverless


def service_process(deployment: Mapping[str, Any]) -> str | None:
    """The pattern the service's process matches: `process`, else the runtime's default."""
    return deployment.get("process") or RUNTIME_DEFAULTS.get(str(deployment.get("runtime")), (None, None))[0]


def service_port(deployment: Mapping[str, Any]) -> int | None:
    """The port the service listens on: `service_port`, else the runtime's default."""
    return deployment.get("service_port") or RUNTIME_DEFAULTS.get(str(deployment.get("runtime")), (None, None))[1]


def probe_targets(deployment: Mapping[str, Any], policy: Policy) -> ProbeTargets:
    """What the probe looks at on the deployment's host."""
    timeouts = policy.get("health_timeouts") or {}
    return ProbeTargets(workspace=workspace(deployment), process_pattern=service_process(deployment),
                        service_port=service_port(deployment), log_path=deployment.get("log_path"),
                        checkpoint_path=deployment.get("checkpoint_path"),
                        nvidia_smi_timeout_s=int(timeouts.get("nvidia_smi_s", 10)),
                        runtime_python=deployment.get("runtime_python"))


def manifest(registry: Registry, file_name: str, key: str, value: Any) -> dict[str, Any] | None:
    """The highest version of the manifest whose `key` is `value` (models.json by name, workflows.json by id);
    None when none has it. A manifest file that does not read is a UserError naming the file and the field."""
    if not value:
        return None
    items = registry.items(file_name)
    matches = [item for item in items if item.get(key) == value]
    return max(matches, key=lambda item: int(item.get("version", 0))) if matches else None
