"""How a workflow's graph fits a ComfyUI server: what the server would answer on POST /prompt, judged against its
node catalog without submitting anything, and what the graph needs that the server lacks (every class, not only the
first the server would name)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, final

from gpuharness.core.comfy_catalog import NodeCatalog
from gpuharness.core.comfy_problems import Problem, cause, problems
from gpuharness.core.comfy_validation import GraphError, validate


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
