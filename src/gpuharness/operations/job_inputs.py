"""A workflow's job inputs: the names it declares, and the refusal of unknown names before a job is submitted
(nothing billed, the deployment left as it was)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuharness.core.errors import UserError
from gpuharness.operations.context import Context
from gpuharness.operations.install import workflow_manifest


def declared_inputs(workflow: Mapping[str, Any], runtime: str | None) -> tuple[str, ...] | None:
    """The input names a job may pass, or None when the workflow declares none that can be known.

    An explicit `inputs` list in the manifest wins. A ComfyUI workflow otherwise exposes its test generation's
    input names, its `parameters`, and each value input that exactly one graph node holds."""
    explicit = workflow.get("inputs")
    if isinstance(explicit, list):
        return tuple(sorted({str(name) for name in explicit}))
    if runtime != "comfyui" or workflow.get("runtime") != "comfyui":
        return None
    spec = workflow.get("test_generation") or {}
    names = set(spec.get("inputs") or {}) | set(workflow.get("parameters") or {})
    holders: dict[str, int] = {}
    for node in _graph(workflow).values():
        values = node.get("inputs") if isinstance(node, dict) else None
        for name, value in (values.items() if isinstance(values, dict) else ()):
            if not isinstance(value, list):  # a list is a link to another node's output, not a value
                holders[name] = holders.get(name, 0) + 1
    names |= {name for name, count in holders.items() if count == 1}
    return tuple(sorted(names))


def _graph(workflow: Mapping[str, Any]) -> Mapping[str, Any]:
    graph = workflow.get("graph") or (workflow.get("test_generation") or {}).get("graph") or {}
    return graph if isinstance(graph, Mapping) else {}


def _addressed(workflow: Mapping[str, Any], key: str) -> bool:
    """A ComfyUI key that names its node: a node id, or NODE.input."""
    graph = _graph(workflow)
    node_id, dot, _ = key.partition(".")
    return key in graph or bool(dot and node_id in graph)


def check_inputs(workflow: Mapping[str, Any], runtime: str | None, inputs: Mapping[str, Any],
                 path: str | Path) -> None:
    """Refuse input names the workflow does not declare: one line naming them and listing the known ones."""
    known = declared_inputs(workflow, runtime)
    if known is None:
        return
    unknown = [key for key in inputs if key not in known
               and not (runtime == "comfyui" and not isinstance(workflow.get("inputs"), list)
                        and _addressed(workflow, key))]
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
