"""What a ComfyUI rejection means for the person who has to fix it: one problem per node input, with its cause.

Works on the server's HTTP 400 body (`{"error", "node_errors"}`) and on `validation.Verdict` alike, so a
rejection reads the same whether a live server, a recording or the offline validator made it.

Causes: `custom_node_missing` (a class the server does not have), `model_missing` (a model file input naming a
file the server does not list), `input_missing` (a file a loader cannot find, e.g. LoadImage), `invalid_value`
(out of range, not in the list, not convertible), `invalid_graph` (missing inputs, bad links, no output node).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, final

from gpuharness.runtimes.comfyui.catalog import MODEL_FOLDERS, NodeCatalog

#: The cause that explains a rejection best when several nodes fail (lower first).
CAUSE_ORDER: Final[tuple[str, ...]] = ("custom_node_missing", "model_missing", "input_missing", "invalid_graph",
                                       "invalid_value")
REMEDIES: Final[Mapping[str, str]] = {
    "custom_node_missing": "install the custom node pack that provides it (ComfyUI-Manager: Install Missing Custom "
                           "Nodes) and restart; if it is installed, its import failed: read the startup log "
                           "(gpuharness diagnose) and pin the node repo to its last known good commit",
    "model_missing": "put the file in the server's models/{folder}/ (list it in models.json and run gpuharness "
                     "install), or change {input} to a file the server has",
    "input_missing": "upload the file to the server's input folder (POST /upload/image) or name one it has",
    "invalid_graph": "fix the graph in ComfyUI and export it again with Save (API)",
    "invalid_value": "set a value the node accepts (see the catalog: gpuharness workflow check --catalog)",
}
_MISSING_CLASS: Final[re.Pattern[str]] = re.compile(r"Cannot execute because node (.+) does not exist\.")


@final
@dataclass(frozen=True, slots=True)
class Problem:
    """One thing the server refused: where (node, class, input), what is wrong, the cause and what to do."""

    cause: str
    kind: str
    what: str
    remedy: str
    node_id: str | None = None
    class_type: str | None = None
    input_name: str | None = None
    missing: str | None = None  # the class or model file that is not on the server

    def line(self) -> str:
        where = []
        if self.node_id is not None:
            where.append(f"node {self.node_id}" + (f" ({self.class_type})" if self.class_type else ""))
        if self.input_name:
            where.append(f"input {self.input_name}")
        head = ", ".join(where) + ": " if where else ""
        return f"{head}{self.what} [{self.cause}]; {self.remedy}"

    def to_json(self) -> dict[str, Any]:
        return {"cause": self.cause, "type": self.kind, "node_id": self.node_id, "class_type": self.class_type,
                "input_name": self.input_name, "missing": self.missing, "what": self.what, "remedy": self.remedy}


def problems(body: Any, catalog: NodeCatalog | None = None) -> list[Problem]:
    """Every problem in a rejection body (`{"error", "node_errors"}`); the catalog, where known, names what the
    server has instead of a missing model."""
    if not isinstance(body, Mapping):
        return [Problem("invalid_graph", "unreadable", f"the server's answer is not a rejection body: "
                        f"{str(body)[:200]}", REMEDIES["invalid_graph"])]
    error = _mapping(body.get("error"))
    node_errors = _mapping(body.get("node_errors"))
    found = [_node_problem(str(node_id), entry, item, catalog)
             for node_id, entry in node_errors.items() if isinstance(entry, Mapping)
             for item in entry.get("errors") or [] if isinstance(item, Mapping)]
    if found:
        return sorted(found, key=lambda p: CAUSE_ORDER.index(p.cause))
    top = _top_problem(error)
    return [top] if top is not None else []


def cause(found: list[Problem]) -> str | None:
    """The cause that explains the rejection best (custom nodes, then models, then files, then the graph)."""
    return min((p.cause for p in found), key=CAUSE_ORDER.index, default=None)


def _top_problem(error: Mapping[str, Any]) -> Problem | None:
    kind = str(error.get("type") or "")
    message = str(error.get("message") or "")
    details = str(error.get("details") or "")
    node_id = details.removeprefix("Node ID '#").removesuffix("'") if details.startswith("Node ID '#") else None
    missing = _MISSING_CLASS.search(message)
    if kind == "missing_node_type" or missing:
        info = error.get("extra_info") or {}
        name = str(info.get("class_type") or (missing.group(1) if missing else info.get("node_title") or "?"))
        return Problem("custom_node_missing", kind, f"the server has no node class {name}",
                       REMEDIES["custom_node_missing"], node_id=node_id, class_type=name, missing=name)
    if kind == "invalid_prompt":
        return Problem("invalid_graph", kind, f"{message} (not an API-format graph? export it with Save (API))",
                       REMEDIES["invalid_graph"], node_id=node_id)
    if kind == "prompt_no_outputs":
        return Problem("invalid_graph", kind, "the graph has no output node (SaveImage, PreviewImage, ...), so "
                       "nothing would run", "add an output node and export the graph again")
    if kind == "prompt_outputs_failed_validation":
        return Problem("invalid_graph", kind, "every output failed validation, upstream of nodes that report no "
                       "error of their own (a reference cycle?)", REMEDIES["invalid_graph"])
    if kind:
        return Problem("invalid_graph", kind, f"{message}: {details}".strip(": "), REMEDIES["invalid_graph"])
    return None


def _node_problem(node_id: str, entry: Mapping[str, Any], item: Mapping[str, Any],
                  catalog: NodeCatalog | None) -> Problem:
    kind = str(item.get("type") or "")
    info = _mapping(item.get("extra_info"))
    class_type = str(entry.get("class_type") or "") or None
    input_name = str(info.get("input_name")) if info.get("input_name") is not None else None
    details = str(item.get("details") or "")
    where = {"node_id": node_id, "class_type": class_type, "input_name": input_name}
    if kind == "value_not_in_list":
        value = info.get("received_value")
        options = _options(info, class_type, input_name, catalog)
        spec = catalog.get(class_type) if catalog is not None and class_type else None
        declared = spec.input(input_name) if spec is not None and input_name else None
        model_input = declared.is_model_input(value) if declared is not None else (
            input_name in MODEL_FOLDERS or (isinstance(value, str) and "." in value and "_name" in (input_name or "")))
        if model_input:
            has = ", ".join(map(str, options)) if options else "no files"
            folder = MODEL_FOLDERS.get(input_name or "", "<folder>")
            return Problem("model_missing", kind, f"model file {value!r} is not on the server (it has: {has})",
                           REMEDIES["model_missing"].format(folder=folder, input=input_name), missing=str(value),
                           **where)
        listed = f"one of {options}" if options is not None else details
        return Problem("invalid_value", kind, f"{value!r} is not {listed}", REMEDIES["invalid_value"], **where)
    if kind == "custom_validation_failed":
        reason = details.split(" - ", 1)[-1]
        cause = "input_missing" if "Invalid " in reason and " file" in reason else "invalid_value"
        return Problem(cause, kind, reason, REMEDIES[cause], **where)
    if kind == "required_input_missing":
        return Problem("invalid_graph", kind, f"required input {input_name} is missing",
                       "link it to an output of the right type or give it a value, then export again", **where)
    if kind == "return_type_mismatch":
        link = info.get("linked_node")
        expected = (info.get("input_config") or ["?"])[0]
        return Problem("invalid_graph", kind, f"linked to output {_link_text(link)} of type "
                       f"{info.get('received_type')}, but the input takes {expected}",
                       f"link an output of type {expected} (e.g. a VAEDecode turns a LATENT into an IMAGE)",
                       **where)
    if kind in ("value_smaller_than_min", "value_bigger_than_max", "invalid_input_type"):
        return Problem("invalid_value", kind, f"{item.get('message')}" + (f" ({details})" if kind ==
                       "invalid_input_type" else ""), REMEDIES["invalid_value"], **where)
    if kind in ("exception_during_validation", "exception_during_inner_validation", "bad_linked_input"):
        link = info.get("linked_node")
        if kind == "bad_linked_input":
            what = f"a link must be [node_id, output_index], got {info.get('received_value')}"
        else:
            what = f"a link ({_link_text(link)}) points to a node or output that does not exist ({details})"
        return Problem("invalid_graph", kind, what, REMEDIES["invalid_graph"], **where)
    return Problem("invalid_graph", kind, f"{item.get('message')}: {details}", REMEDIES["invalid_graph"], **where)


def _options(info: Mapping[str, Any], class_type: str | None, input_name: str | None,
             catalog: NodeCatalog | None) -> list[Any] | None:
    config = info.get("input_config")
    if isinstance(config, list) and config and isinstance(config[0], list):
        return config[0]
    if isinstance(config, list) and config and config[0] == "COMBO" and len(config) > 1:
        options = (config[1] or {}).get("options")
        return options if isinstance(options, list) else None
    node_class = catalog.get(class_type) if catalog is not None and class_type else None
    spec = node_class.input(input_name) if node_class is not None and input_name else None
    return spec.combo_options if spec is not None else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _link_text(link: Any) -> str:
    if isinstance(link, list) and len(link) == 2:
        return f"{link[1]} of node {link[0]}"
    return str(link)
