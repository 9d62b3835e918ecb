"""`gpuharness workflow check|add|show|list`: ComfyUI graphs checked against a node catalog before anything is
rented, and workflows.json entries made from a graph exported with ComfyUI's Save (API)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import httpx

from gpuharness.cli import emit, existing_registry, show
from gpuharness.cli.arguments import positive, whole
from gpuharness.core import json_text, regular_file, runtimes
from gpuharness.core.errors import UserError
from gpuharness.core.registry import Registry
from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes.comfyui.catalog import CatalogError, NodeCatalog
from gpuharness.runtimes.comfyui.client import ComfyUI, InputError, build_test_graph
from gpuharness.runtimes.comfyui.problems import Problem, cause, problems
from gpuharness.runtimes.comfyui.validation import GraphError, Verdict, graph_of, output_nodes, validate
from gpuharness.sim.comfyui import recorded_catalog

EXIT_REJECTED = 1
#: What each core output node writes (the test generation's expected_outputs type).
OUTPUT_TYPES: dict[str, str] = {
    "SaveImage": "image/png", "PreviewImage": "image/png", "SaveAnimatedPNG": "image/png",
    "SaveAnimatedWEBP": "image/webp", "SaveWEBM": "video/webm", "SaveVideo": "video/mp4",
    "SaveAudio": "audio/flac", "SaveAudioMP3": "audio/mpeg", "SaveAudioOpus": "audio/opus",
    "VHS_VideoCombine": "video/mp4",
}


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    workflow = subparsers.add_parser("workflow", help="ComfyUI graphs and the workflows.json manifest")
    sub = workflow.add_subparsers(dest="workflow_command", metavar="ACTION", required=True)

    p = sub.add_parser("check", parents=[common], help="validate a graph as ComfyUI would, against a node catalog "
                       "(exit 0 accepted, 1 rejected, 2 bad input)")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="an API-format graph (Save (API)), a POST /prompt body, or a workflow manifest entry")
    p.add_argument("--workflow", metavar="ID", help="check a workflow of workflows.json instead of a file")
    _catalog_options(p)
    p.set_defaults(handler=cmd_check)

    p = sub.add_parser("add", parents=[common], help="add a workflow to workflows.json from an exported graph")
    p.add_argument("--from", dest="source", metavar="FILE", help="the graph, exported with ComfyUI's Save (API)")
    p.add_argument("--id", required=True, help="the workflow id (deployments name it in `workflow`)")
    p.add_argument("--runtime", default="comfyui", choices=runtimes.generating(),
                   help="the runtime the graph runs on (default comfyui)")
    p.add_argument("--model", help="the model it needs (a models.json name)")
    p.add_argument("--version", type=whole(minimum=1),
                   help="the version (default: one more than the newest with this id)")
    p.add_argument("--min-bytes", type=whole(), default=1, help="the smallest acceptable output, per output type")
    p.add_argument("--timeout", type=positive, default=300.0, help="the test generation's timeout in seconds")
    p.add_argument("--inputs", help="test inputs as JSON (openai/serverless: the request; comfyui: NODE.input)")
    p.add_argument("--force", action="store_true", help="add it even when the catalog rejects the graph")
    _catalog_options(p)
    p.set_defaults(handler=cmd_add)

    p = sub.add_parser("show", parents=[common], help="a workflow of workflows.json, with its graph's summary")
    p.add_argument("id", help="the workflow id")
    p.add_argument("--version", type=whole(minimum=1), help="that version (default: the newest)")
    p.set_defaults(handler=cmd_show)

    p = sub.add_parser("list", parents=[common], help="the workflows of workflows.json")
    p.set_defaults(handler=cmd_list)


def _catalog_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--catalog", metavar="FILE", help="a saved GET /object_info answer of the server")
    group.add_argument("--server", metavar="URL", help="a running ComfyUI (its /object_info is read)")


# --- check ------------------------------------------------------------------------------------------------------

def cmd_check(args: argparse.Namespace) -> int:
    if args.catalog is None and args.server is None:
        raise UserError("say which catalog to check against", place="workflow check",
                        hint="--catalog object_info.json (curl http://HOST:8188/object_info) or --server URL")
    if (args.file is None) == (args.workflow is None):
        raise UserError("give a graph FILE or --workflow ID (one of them)", place="workflow check")
    graph, origin = (_registry_graph(existing_registry(args), args.workflow) if args.workflow
                     else _file_graph(Path(args.file)))
    catalog = catalog_from(args)
    verdict = validate(graph, catalog)
    found = problems(verdict.body(), catalog) if verdict.error or verdict.node_errors else []
    emit(args, verdict.to_json(), _check_text(origin, graph, catalog, verdict, found))
    return 0 if verdict.accepted else EXIT_REJECTED


def _check_text(origin: str, graph: dict[str, Any], catalog: NodeCatalog, verdict: Verdict,
                found: list[Problem]) -> str:
    if verdict.accepted:
        head = f"{origin}: accepted by {catalog.source}: {len(graph)} nodes, outputs {', '.join(verdict.good_outputs)}"
        lines = [head] + [f"  warning: {p.line()} (its output is ignored)" for p in found]
    else:
        head = f"{origin}: rejected ({cause(found) or 'invalid_graph'}): {(verdict.error or {}).get('message')}"
        lines = [head] + [f"  {p.line()}" for p in found]
    return "\n".join(lines)


def catalog_from(args: argparse.Namespace) -> NodeCatalog:
    """--catalog FILE or --server URL."""
    if args.catalog is not None:
        return NodeCatalog.load(args.catalog)
    try:
        with PhaseHttp(args.server, timeout_s=60.0) as http:
            return ComfyUI(http).catalog()
    except httpx.HTTPStatusError as exc:
        raise UserError(f"GET /object_info answered {exc.response.status_code}", place=args.server,
                        hint="is it a ComfyUI server?") from None
    except httpx.HTTPError as exc:
        raise UserError(f"cannot read the catalog: {type(exc).__name__}: {exc}", place=args.server,
                        hint="is the server running and reachable?") from None
    except CatalogError as exc:
        raise UserError(str(exc), place=args.server) from None


def _file_graph(path: Path) -> tuple[dict[str, Any], str]:
    raw = regular_file.read_named(path, what="the graph")  # a regular file under its cap
    try:
        document = json_text.loads_outside(raw, what="the graph")
    except ValueError as exc:  # not JSON, or nested too deeply
        raise UserError(str(exc).replace("the graph: not JSON", "not JSON"), path=path) from None
    if isinstance(document, dict) and isinstance(document.get("test_generation"), dict):
        try:
            return build_test_graph(document), str(path)  # a workflow manifest entry
        except InputError as exc:
            raise UserError(str(exc), path=path, place="test_generation.inputs") from None
    try:
        return graph_of(document), str(path)
    except GraphError as exc:
        raise UserError(str(exc), path=path) from None


def _registry_graph(registry: Registry, workflow_id: str) -> tuple[dict[str, Any], str]:
    workflow = newest(registry, workflow_id)
    place = f"{registry.path('workflows.json')}:{workflow_id}"
    if workflow.get("runtime") != "comfyui":
        raise UserError(f"workflow {workflow_id} runs on {workflow.get('runtime')}, not comfyui: it has no graph",
                        place=place)
    try:
        graph = build_test_graph(workflow)
    except InputError as exc:
        raise UserError(str(exc), place=f"{place}.test_generation.inputs") from None
    return graph, place


def newest(registry: Registry, workflow_id: str, version: int | None = None) -> dict[str, Any]:
    matches = [w for w in registry.items("workflows.json") if w.get("id") == workflow_id
               and (version is None or w.get("version") == version)]
    if not matches:
        raise UserError(f"no workflow {workflow_id!r}" + (f" version {version}" if version else ""),
                        path=registry.path("workflows.json"), hint="see `gpuharness workflow list`")
    return max(matches, key=lambda w: int(w.get("version", 0)))


# --- add --------------------------------------------------------------------------------------------------------

def cmd_add(args: argparse.Namespace) -> int:
    registry = existing_registry(args)
    inputs = _inputs(args.inputs)
    entry: dict[str, Any] = {"id": args.id, "runtime": args.runtime}
    if args.model:
        entry["model"] = args.model
    notes: list[str] = []
    if args.runtime == "comfyui":
        if args.source is None:
            raise UserError("a comfyui workflow needs its graph: --from FILE (ComfyUI: Workflow > Export (API))",
                            place="workflow add")
        graph, _ = _file_graph(Path(args.source))
        catalog = catalog_from(args) if args.catalog or args.server else recorded_catalog()
        expected, notes = _expected_outputs(graph, catalog, args.min_bytes)
        if args.catalog or args.server:
            verdict = validate(graph, catalog)
            if not verdict.accepted and not args.force:
                found = problems(verdict.body(), catalog)
                show("\n".join([f"{args.source}: rejected by {catalog.source}, not added (--force adds it anyway)"]
                                + [f"  {p.line()}" for p in found]))
                return EXIT_REJECTED
        else:
            notes.append(f"output nodes found with the recorded ComfyUI 0.8.0 catalog; check the graph against "
                         f"your server: gpuharness workflow check --workflow {args.id} --server URL")
        entry["graph"] = graph
        entry["test_generation"] = {"expected_outputs": expected, "timeout_s": args.timeout}
        if inputs:
            entry["test_generation"]["inputs"] = inputs
    else:
        if args.source is not None:
            raise UserError(f"--from takes a ComfyUI graph; a {args.runtime} workflow takes --inputs JSON",
                            place="workflow add")
        entry["test_generation"] = {"inputs": inputs or {"prompt": "Hello"}, "timeout_s": args.timeout,
                                    "expected_outputs": [{"min_bytes": max(args.min_bytes, 1)}]}
    with registry.update("workflows.json") as document:
        versions = [int(w.get("version", 0)) for w in document["workflows"] if w.get("id") == args.id]
        entry["version"] = args.version or (max(versions) + 1 if versions else 1)
        if entry["version"] in versions:
            raise UserError(f"workflow {args.id} version {entry['version']} exists", path=registry.path(
                "workflows.json"), hint="leave --version out to add the next version; nothing was changed")
        document["workflows"].append(entry)
    text = [f"added workflow {args.id} version {entry['version']} ({args.runtime}) to "
            f"{registry.path('workflows.json')}"]
    text += [f"  expects {json.dumps(e)}" for e in entry["test_generation"].get("expected_outputs", [])]
    text += [f"  note: {n}" for n in notes]
    emit(args, {"workflow": entry, "notes": notes}, "\n".join(text))
    return 0


def _inputs(text: str | None) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        value = json_text.loads_outside(text, what="--inputs")
    except ValueError as exc:  # not JSON, or nested too deeply
        raise UserError(str(exc).replace("--inputs: not JSON", "--inputs is not JSON"), place="--inputs") from None
    if not isinstance(value, dict):
        raise UserError("--inputs must be a JSON object", place="--inputs")
    return value


def _expected_outputs(graph: dict[str, Any], catalog: NodeCatalog,
                      min_bytes: int) -> tuple[list[dict[str, Any]], list[str]]:
    """One expected output per kind the graph's output nodes write."""
    notes: list[str] = []
    unknown = sorted({str(n.get("class_type")) for n in graph.values() if isinstance(n, dict)
                      and n.get("class_type") not in catalog})
    if unknown:
        notes.append(f"classes not in the catalog (custom nodes?): {', '.join(unknown)}")
    outputs = output_nodes(graph, catalog)
    if not outputs:
        raise UserError("the graph has no output node the catalog knows (SaveImage, PreviewImage, ...): ComfyUI "
                        "would refuse it with prompt_no_outputs", place="workflow add",
                        hint="add an output node, or pass --catalog/--server with your custom output node")
    expected: list[dict[str, Any]] = []
    for node_id in outputs:
        kind = OUTPUT_TYPES.get(str(graph[node_id]["class_type"]))
        item: dict[str, Any] = {"type": kind, "min_bytes": min_bytes} if kind else {"min_bytes": min_bytes}
        if item not in expected:
            expected.append(item)
    described = [f"{n} ({graph[n]['class_type']})" for n in outputs]
    notes.append(f"output nodes: {', '.join(described)}")
    return expected, notes


# --- show, list -------------------------------------------------------------------------------------------------

def cmd_show(args: argparse.Namespace) -> int:
    workflow = newest(existing_registry(args), args.id, args.version)
    text = [f"{workflow['id']} version {workflow.get('version')} ({workflow.get('runtime')}), model "
            f"{workflow.get('model') or '-'}"]
    graph = workflow.get("graph") or (workflow.get("test_generation") or {}).get("graph")
    if isinstance(graph, dict):
        classes = sorted({str(n.get("class_type")) for n in graph.values() if isinstance(n, dict)})
        files = sorted({str(v) for n in graph.values() if isinstance(n, dict) for k, v in
                        (n.get("inputs") or {}).items() if k.endswith("_name") and isinstance(v, str) and "." in v})
        text.append(f"  graph: {len(graph)} nodes; classes {', '.join(classes)}")
        if files:
            text.append(f"  model files: {', '.join(files)}")
    spec = workflow.get("test_generation") or {}
    text.append(f"  test generation: timeout {spec.get('timeout_s')} s, expects "
                f"{json.dumps(spec.get('expected_outputs') or [])}, inputs {json.dumps(spec.get('inputs') or {})}")
    if workflow.get("parameters"):
        text.append(f"  parameters: {json.dumps(workflow['parameters'])}")
    emit(args, workflow, "\n".join(text))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    workflows = existing_registry(args).items("workflows.json")
    rows = [f"{w['id']:<28} v{w.get('version')}  {w.get('runtime'):<10} {w.get('model') or '-'}" for w in workflows]
    emit(args, workflows, "\n".join(rows) if rows else "no workflows yet: gpuharness workflow add --from GRAPH "
         "--id ID (see the README, Workflows)")
    return 0
