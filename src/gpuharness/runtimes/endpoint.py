"""The one place a client of a deployment's runtime endpoint is built: its base URL from the record and, for a
serverless endpoint, the provider's key from the variable its providers.json entry names."""

from __future__ import annotations

import os

from gpuharness.core.deployment import Deployment
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.remote.http import PhaseHttp


def runtime_client(deployment: Deployment, registry: Registry, *, deadline_s: float | None = None
                   ) -> PhaseHttp | None:
    """The one HTTP seam to the deployment's endpoint (None: no endpoint recorded); a serverless runtime's carries
    the provider's key from the variable its `credential_env` names. With deadline_s, that is its phase deadline:
    no answer arrives, and no socket waits, past that many seconds from now (remote.http)."""
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
    return PhaseHttp(str(endpoint), headers=headers, deadline_s=deadline_s)
