"""How a workflow's graph fits a ComfyUI server: what the server would answer on POST /prompt, judged against its
node catalog without submitting anything, and what the graph needs that the server lacks (every class, not only the
first the server would name). The catalog is the one the health run observed (probe.server_catalog): taken with
the probe, or recorded with its transcript."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

import httpx

from gpuharness.core.deployment import Deployment
from gpuharness.core.policy import Policy
from gpuharness.core.registry import Registry
from gpuharness.probe import targets
from gpuharness.probe.server_catalog import CatalogFetch, CatalogObservation, CatalogUnavailable, CatalogUnreadable
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes import Outcome, failed
from gpuharness.runtimes.comfyui.catalog import CatalogError, NodeCatalog
from gpuharness.runtimes.comfyui.client import ComfyUI, InputError, build_test_graph
from gpuharness.runtimes.comfyui.problems import Problem, cause, problems
from gpuharness.runtimes.comfyui.validation import GraphError, validate
from gpuharness.runtimes.endpoint import runtime_client


@final
@dataclass(frozen=True, slots=True)
class WorkflowFit:
    """The verdict on one graph against one server's catalog. `judged` is False when there was no catalog (or no
    graph) to judge by; `note` says why."""

    judged: bool
    accepted: bool = True
    problems: tuple[Problem, ...] = ()
    missing_classes: tuple[str, ...] = ()
    note: str = ""
    catalog_source: str = ""

    @property
    def rejected(self) -> bool:
        return self.judged and not self.accepted

    @property
    def cause(self) -> str | None:
        """The cause that explains a rejection best (custom_node_missing, model_missing, ...)."""
        return cause(list(self.problems)) if self.rejected else None

    @property
    def missing_models(self) -> tuple[str, ...]:
        return tuple(p.missing for p in self.problems if p.cause == "model_missing" and p.missing)

    def explain(self) -> str:
        """One line per problem (node, class, input, what, cause, remedy), or what the graph needs that is absent."""
        lines = [p.line() for p in self.problems[:5]]
        absent = [name for name in self.missing_classes if not any(p.missing == name for p in self.problems)]
        if absent:
            lines.append(f"the graph also uses {', '.join(absent)}, which the server lacks")
        return "; ".join(lines)


def not_judged(note: str) -> WorkflowFit:
    return WorkflowFit(judged=False, note=note)


def fit(graph: Mapping[str, Any] | None, catalog: NodeCatalog | None, *, missing: str | None = None) -> WorkflowFit:
    """The graph judged against the catalog as the server would judge it; not judged (with `missing`, why) when
    either is absent."""
    if catalog is None:
        return not_judged(missing or "no server catalog to judge the workflow by")
    if not graph:
        return not_judged("the workflow has no ComfyUI graph to judge")
    try:
        verdict = validate(graph, catalog)
    except GraphError as exc:
        return WorkflowFit(judged=True, accepted=False, problems=(Problem(
            "invalid_graph", "invalid_prompt", str(exc), "export the graph again with Save (API)"),),
            catalog_source=catalog.source)
    classes = [node.get("class_type") for node in graph.values() if isinstance(node, Mapping)]
    absent = tuple(dict.fromkeys(name for name in classes if isinstance(name, str) and name not in catalog))
    if verdict.accepted:
        return WorkflowFit(judged=True, missing_classes=absent, catalog_source=catalog.source)
    return WorkflowFit(judged=True, accepted=False, problems=tuple(problems(verdict.body(), catalog)),
                       missing_classes=absent, catalog_source=catalog.source)


def catalog_of(observation: CatalogObservation) -> NodeCatalog | None:
    """The node catalog an observation holds (None: it holds none; CatalogError: its file is not a catalog)."""
    return _catalog(observation.file) if observation.file is not None else None


@functools.lru_cache(maxsize=16)
def _catalog(file: str) -> NodeCatalog:
    """A recorded catalog, parsed once per process (the files are content-addressed: they never change)."""
    try:
        document = CatalogObservation(file=file).document()
    except CatalogUnreadable as exc:
        raise CatalogError(str(exc)) from None
    return NodeCatalog(document or {}, source=file)


def judge_test_graph(workflow: Mapping[str, Any] | None, observation: CatalogObservation | None) -> WorkflowFit:
    """The workflow's test graph (its inputs applied) against the server catalog the health run observed."""
    if workflow is None:
        return not_judged("the deployment has no workflow manifest")
    if observation is None:
        return not_judged("no server catalog was taken in this run")
    try:
        catalog = catalog_of(observation)
    except CatalogError as exc:
        return not_judged(str(exc))
    try:
        graph = build_test_graph(workflow)
    except InputError:  # the test generation reports bad inputs; the graph's classes and files are still judged
        graph = (workflow.get("test_generation") or {}).get("graph") or workflow.get("graph") or {}
    return fit(graph, catalog, missing=observation.missing)


def refusal(judged: WorkflowFit) -> Outcome | None:
    """The test generation's outcome when the server would refuse the graph: it is never submitted (None: it
    would be accepted, or was not judged)."""
    if not judged.rejected:
        return None
    return failed(judged.cause or "prompt_rejected", "the server would refuse the test graph (judged against its "
                  f"node catalog, not submitted): {judged.explain()}", problems=[p.to_json() for p in judged.problems])


def catalog_fetch(registry: Registry) -> CatalogFetch:
    """The probe phase's fetch of a server's node catalog: one GET /object_info over the runtime HTTP seam, its whole
    answer within the probe phase's deadline (`health_timeouts.probe_s`), under the seam's byte cap and parsed
    under core.json_text's depth bound: a dripping, huge or too deep catalog is named, never waited on forever."""

    def fetch(deployment: Deployment) -> Mapping[str, Any]:
        deadline_s = targets.probe_deadline_s(Policy(registry.policy_document()))
        client = runtime_client(deployment, registry, deadline_s=deadline_s)
        if client is None:
            raise CatalogUnavailable("no endpoint recorded for the service")
        try:
            with client:
                return ComfyUI(PhaseHttp.over(client, deadline_s=deadline_s)).catalog(timeout_s=deadline_s).document
        except httpx.TimeoutException as exc:
            raise CatalogUnavailable(f"{type(exc).__name__}: {exc}: not within the probe phase's deadline of "
                                     f"{deadline_s:g} s (policy health_timeouts.probe_s); check the server, or raise "
                                     "probe_s if its catalog is that slow") from None
        except httpx.HTTPError as exc:
            raise CatalogUnavailable(f"{type(exc).__name__}: {exc}") from None
        except CatalogError as exc:
            raise CatalogUnavailable(str(exc)) from None

    return fetch
