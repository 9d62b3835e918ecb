"""The one place a client of a deployment's runtime endpoint is built: its base URL from the record and, for a
serverless endpoint, the provider's key from the variable its providers.json entry names."""

from __future__ import annotations

import os
import time

import httpx

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.remote.deadline import DeadlineTransport


def runtime_client(deployment: Deployment, registry: Registry, *, deadline_s: float | None = None
                   ) -> httpx.Client | None:
    """A client for the deployment's endpoint (None: no endpoint recorded); a serverless runtime's carries the
    provider's key from the variable its `credential_env` names. With deadline_s, no socket of it waits past that
    many seconds from now (remote.deadline)."""
    endpoint = deployment.endpoint
    if not endpoint:
        return None
    headers = {}
    if deployment.is_serverless:
        try:
            env = registry.provider(deployment.provider).get("credential_env")
        except UserError:
            env = None
        if env and os.environ.get(env):
            headers["Authorization"] = f"Bearer {os.environ[env]}"
        endpoint = str(endpoint).rstrip("/") + "/"
    transport = None
    if deadline_s is not None:
        end = time.monotonic() + deadline_s
        transport = DeadlineTransport(lambda: end - time.monotonic())
    return httpx.Client(base_url=str(endpoint), headers=headers, timeout=httpx.Timeout(30.0), transport=transport)
