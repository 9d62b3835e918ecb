"""The real seams for the command line: provider adapters from providers.json, SSH from the deployment's
route (connections.json first), and the job runtime from the deployment's runtime."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.operations.comfy_job import ComfyJobExecutor
from gpuharness.operations.context import Context
from gpuharness.operations.openai_job import OpenAIJobExecutor
from gpuharness.operations.run import JobExecutor
from gpuharness.operations.serverless_job import ServerlessJobExecutor
from gpuharness.providers.base import Provider
from gpuharness.providers.factory import build_provider, build_serverless
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


def executor_factory(registry: Registry, env: Mapping[str, str] | None = None) -> Any:
    """The job runtime of a deployment: ComfyUI or an OpenAI-compatible server over HTTP (outputs kept on the
    host, over the deployment's SSH route), or the RunPod Serverless endpoint."""
    def executor_for(deployment: Deployment) -> JobExecutor:
        runtime = deployment.runtime
        if runtime == "comfyui":
            return ComfyJobExecutor(deployment)
        if runtime == "openai":
            return OpenAIJobExecutor(deployment, remote_factory(registry))
        if runtime == "serverless":
            entry = registry.provider(deployment.provider)
            return ServerlessJobExecutor(build_serverless(entry, deployment.instance_id or None, env=env))
        raise UserError(f"running jobs on a {runtime!r} runtime is not supported yet", place=deployment.id,
                        hint="supported: comfyui, openai, serverless")

    return executor_for


def cli_context(registry: Registry) -> Context:
    """The context the CLI commands use."""
    return Context(registry=registry, providers=provider_factory(registry), remotes=remote_factory(registry),
                   executors=executor_factory(registry))
