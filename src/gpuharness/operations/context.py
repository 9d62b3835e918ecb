"""What every lifecycle operation needs: the registry, the seams to providers, hosts and runtimes, time, output."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, final

from gpuharness.core.clock import WallClock, format_ts, utcnow
from gpuharness.core.deployment import Deployment
from gpuharness.core.registry import Registry
from gpuharness.operations.transfers import QuietTransfers, Transfers
from gpuharness.providers.base import Instance, Provider
from gpuharness.remote import Remote

#: Builds one Provider (one HTTP client) from a providers.json entry, for one phase.
ProviderFactory = Callable[[dict[str, Any]], Provider]
#: Opens one connection to a deployment's host, for one phase.
RemoteFactory = Callable[[Deployment], Remote]


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@final
@dataclass(slots=True)
class Context:
    """The registry plus injectable seams: tests pass fakes or the simulator; the CLI passes the real ones."""

    registry: Registry
    providers: ProviderFactory
    remotes: RemoteFactory
    executors: Callable[[Deployment], Any] | None = None  # -> run.JobExecutor
    #: extra deployment fields only the host knows (ssh key_file/known_hosts/workspace, endpoint, service_port)
    host_details: Callable[[Instance], dict[str, Any]] | None = None
    clock: WallClock = utcnow
    sleep: Callable[[float], None] = time.sleep
    say: Callable[[str], None] = _stderr
    options: dict[str, Any] = field(default_factory=dict)
    #: live byte progress of install's downloads and retrieve's transfers (the CLI's bar on a terminal)
    transfers: Transfers = field(default_factory=QuietTransfers)

    def now(self) -> str:
        """The current time, formatted (from the injectable clock)."""
        return format_ts(self.clock())

    def provider_for(self, name: str) -> Provider:
        """A fresh provider client for this phase, from the providers.json entry called name."""
        return self.providers(self.registry.provider(name))
