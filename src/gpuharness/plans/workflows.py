"""The plan rule `workflow`: a step that runs a workflow has its graph judged against the server catalog recorded
with its deployment's probe transcript, as the server would judge it on submission. Where nothing was recorded to
judge by, the rule says so (a skip, with how to record one), never passes blind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.core.runtimes import runtime
from gpuharness.probe import targets, transcripts
from gpuharness.runtimes.comfyui.client import InputError, job_graph
from gpuharness.runtimes.comfyui.workflow_fit import catalog_of, fit

#: The rule of a step that runs a workflow: the server it runs on would accept its graph.
WORKFLOW_RULE: Final = "workflow"


@final
@dataclass(frozen=True, slots=True)
class PlannedWorkflows:
    """Where a planned workflow is judged from: the registry's workflows and deployments, and the catalogs recorded
    with the probe transcripts under the cassette directory."""

    registry: Registry
    cassettes: Path


@final
@dataclass(frozen=True, slots=True)
class WorkflowJudgement:
    """The rule's answer for one step: a problem (the server would refuse the graph), a reason it could not be
    judged (`unjudged`), or neither (accepted)."""

    problem: str | None = None
    unjudged: str | None = None


def planned_workflow(step: Mapping[str, Any], registry: Registry) -> tuple[str | None, str | None]:
    """(workflow id, deployment id) a step runs: `spec.workflow`, else a run step's deployment's workflow."""
    dep_id = (step.get("target") or {}).get("deployment_id")
    workflow_id = (step.get("spec") or {}).get("workflow")
    if workflow_id is None and step["action"] == "run" and dep_id:
        try:
            workflow_id = registry.deployment(dep_id).workflow
        except UserError:
            workflow_id = None  # rule target reports the unknown deployment
    return workflow_id, dep_id


def judge_planned_workflow(step: Mapping[str, Any], where: PlannedWorkflows) -> WorkflowJudgement:
    """Why the server the step runs on would refuse its workflow's graph, judged by the catalog recorded with the
    deployment's probe transcript; unjudged where no catalog was recorded or the runtime has none."""
    workflow_id, dep_id = planned_workflow(step, where.registry)
    try:
        workflow = targets.manifest(where.registry, "workflows.json", "id", workflow_id)
    except UserError as exc:
        return WorkflowJudgement(problem=exc.line())
    if workflow is None:
        return WorkflowJudgement(problem=f"workflow {workflow_id!r} is not in {where.registry.path('workflows.json')}")
    entry = runtime(workflow.get("runtime"))
    if entry is None or not entry.node_catalog:  # only a server with a node catalog can refuse a graph
        return WorkflowJudgement(unjudged=f"workflow {workflow_id} runs on {workflow.get('runtime')}: no node "
                                          "catalog to judge it by")
    observation = transcripts.recorded_catalog(where.cassettes, str(dep_id)) if dep_id else None
    if observation is None or observation.missing:
        why = observation.missing if observation is not None else (
            f"no probe transcript {transcripts.transcript_path(where.cassettes, str(dep_id))}")
        return WorkflowJudgement(unjudged=f"workflow {workflow_id} not judged: no server catalog recorded for "
                                          f"{dep_id} ({why}); record one with `pytest checks/health --gpu-mode "
                                          f"record --deployment {dep_id}`")
    try:
        graph = job_graph(workflow, (step.get("spec") or {}).get("inputs") or {})
    except InputError as exc:
        return WorkflowJudgement(problem=f"workflow {workflow_id}: {exc}")
    judged = fit(graph, catalog_of(observation))
    if not judged.rejected:
        return WorkflowJudgement()
    return WorkflowJudgement(problem=f"{dep_id}'s server would refuse workflow {workflow_id} v"
                                     f"{workflow.get('version')} ({judged.cause}; judged by the catalog recorded "
                                     f"{observation.file}): {judged.explain()}")
