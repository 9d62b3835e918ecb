"""The real seams for the command line: provider adapters from providers.json, SSH from the deployment's
route (connections.json first), and the job runtime from the deployment's runtime (its executor, the module
`operations/<runtime>_job.py`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.runtimes import RUNTIMES, half
from gpuharness.operations.context import Context
from gpuharness.operations.run import ExecutorSeams, JobExecutor
from gpuharness.providers.base import Provider
from gpuharness.providers.factory import build_provider
from gpuharness.remote import Remote
from gpuharness.remote.connect import open_remote
from gpuharness.remote.route import resolve


def provider_factory(registry: Registry) -> Any:
    """One adapter (one HTTP client) per providers.json entry and phase; the key comes from credential_env."""
    def build(entry: dict[str, Any]) -> Provider:
        return build_provider(entry, registry=registry)

    return build


def remote_factory(registry: Registry) -> Any:
    def connect(deployment: Deployment) -> Remote:
        connections = registry.items("connections.json")
        remote: Remote = open_remote(resolve(deployment, connections))
        return remote

    return connect


class ExecutorModule(Protocol):
    """A runtime's executor module, as the run phase's seam calls it."""

    def build(self, deployment: Deployment, seams: ExecutorSeams) -> JobExecutor: ...


#: a runtime's executor is the module of this package named after it: operations/<runtime>_job.py
EXECUTOR_SUFFIX = "_job"


def executor_of(name: str | None) -> ExecutorModule | None:
    """A runtime's executor module, operations/<runtime>_job.py (None: an unknown runtime, or no jobs to run on it)."""
    if name is None or name not in RUNTIMES:
        return None
    return cast("ExecutorModule | None", half(name, __package__ or "gpuharness.operations", EXECUTOR_SUFFIX))


def executor_factory(registry: Registry, env: Mapping[str, str] | None = None) -> Any:
    """The job runtime of a deployment, built by its runtime's executor module: ComfyUI or an OpenAI-compatible
    server over HTTP (outputs kept on the host, over the deployment's SSH route), or the RunPod Serverless
    endpoint."""
    seams = ExecutorSeams(registry, remote_factory(registry), env)

    def executor_for(deployment: Deployment) -> JobExecutor:
        module = executor_of(deployment.runtime)
        if module is None:
            supported = ", ".join(name for name in RUNTIMES if executor_of(name) is not None)
            raise UserError(f"running jobs on a {deployment.runtime!r} runtime is not supported yet",
                            place=deployment.id, hint=f"supported: {supported}")
        return module.build(deployment, seams)

    return executor_for


def cli_context(registry: Registry) -> Context:
    """The context the CLI commands use."""
    return Context(registry=registry, providers=provider_factory(registry), remotes=remote_factory(registry),
                   executors=executor_factory(registry))
