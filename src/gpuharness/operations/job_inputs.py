"""A workflow's job inputs: the names it declares, and the refusal of unknown names before a job is submitted
(nothing billed, the deployment left as it was).

An explicit `inputs` list in the manifest is the contract. Without one, the runtime's executor module
(operations/<runtime>_job.py) may derive the names from the workflow (`job_inputs(workflow)`) and accept keys that
address the workflow directly (`addresses(workflow, key)`); a runtime with neither is not checked."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from gpuharness.core.errors import UserError
from gpuharness.core.runtimes import RUNTIMES, half
from gpuharness.operations.context import Context
from gpuharness.operations.install import workflow_manifest

#: the executor modules of this package: operations/<runtime>_job.py (as operations.seams finds them)
_PACKAGE = __package__ or "gpuharness.operations"


def _hook(runtime: str | None, workflow: Mapping[str, Any], name: str) -> Callable[..., Any] | None:
    """The runtime's hook, when the workflow is written for the deployment's runtime."""
    if runtime is None or runtime not in RUNTIMES or workflow.get("runtime") != runtime:
        return None
    hook = getattr(half(runtime, _PACKAGE, "_job"), name, None)
    return hook if callable(hook) else None


def declared_inputs(workflow: Mapping[str, Any], runtime: str | None) -> tuple[str, ...] | None:
    """The input names a job may pass, or None when the workflow declares none that can be known."""
    explicit = workflow.get("inputs")
    if isinstance(explicit, list):
        return tuple(sorted({str(name) for name in explicit}))
    derive = _hook(runtime, workflow, "job_inputs")
    return None if derive is None else tuple(sorted(derive(workflow)))


def check_inputs(workflow: Mapping[str, Any], runtime: str | None, inputs: Mapping[str, Any],
                 path: str | Path) -> None:
    """Refuse input names the workflow does not declare: one line naming them and listing the known ones."""
    known = declared_inputs(workflow, runtime)
    if known is None:
        return
    addresses = None if isinstance(workflow.get("inputs"), list) else _hook(runtime, workflow, "addresses")
    unknown = [key for key in inputs if key not in known and not (addresses and addresses(workflow, key))]
    if unknown:
        listed = ", ".join(known) if known else "none"
        raise UserError(f"workflow {workflow.get('id')} has no input {', '.join(map(repr, unknown))}; "
                        f"its inputs: {listed}", path=path, place=str(workflow.get("id")),
                        hint="fix the --inputs names; nothing was submitted or billed")


def check_batch(ctx: Context, deployment_id: str, workflow_id: str | None,
                batch: list[dict[str, Any]]) -> None:
    """Every job of a batch checked before the first is submitted: a typo in the third costs nothing either."""
    deployment = ctx.registry.deployment(deployment_id)
    workflow = workflow_manifest(ctx, workflow_id or deployment.workflow)
    if workflow is None:
        return
    for inputs in batch:
        check_inputs(workflow, deployment.runtime, inputs, ctx.registry.path("workflows.json"))
