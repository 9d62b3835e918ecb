"""Validate a ComfyUI API-format graph against a node catalog, deciding what ComfyUI 0.8.0 decides on POST /prompt.

The rules are ComfyUI's (`execution.py`: `validate_prompt`, `validate_inputs`; `comfy_execution/validation.py`:
`validate_node_input`), and so is the answer: the `error` and `node_errors` of its HTTP 400 body.

- Every node needs a `class_type` the catalog knows, or the whole graph is `invalid_prompt` (all nodes, reachable
  or not); then at least one output node (`prompt_no_outputs`).
- Only what an output node reaches is validated: each output, then recursively every node it links to.
- Per input, in order: missing required input, a link (`[node_id, output_index]`, type-checked against the linked
  class's outputs; a link to a missing node or output index raises, reported as `exception_during_validation` on
  the output or `exception_during_inner_validation` on the linking node), or a value (converted to INT, FLOAT,
  STRING or BOOLEAN as Python would; then min, max, and combo lists).
- A graph is accepted when at least one output validates; the failed outputs' nodes are still in `node_errors`.

Known differences, where the catalog cannot say what the server's Python would do: a node's own VALIDATE_INPUTS
is known only for the core file loaders (CUSTOM_VALIDATED); v3 dynamic inputs (autogrow, dynamic combo) are not
checked; the server validates outputs and a node's inputs in set order (random per process), this in graph and
declaration order; a reference cycle is reported on the node that closes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, final

from gpuharness.core.errors import GpuharnessError
from gpuharness.runtimes.comfyui.catalog import InputSpec, NodeCatalog

#: Core nodes with their own VALIDATE_INPUTS: (class, input) -> the message it returns for a file not on disk.
#: Those inputs skip the combo check; the file is looked up in the catalog's list instead.
CUSTOM_VALIDATED: Final[Mapping[tuple[str, str], str]] = {
    ("LoadImage", "image"): "Invalid image file: {}",
    ("LoadImageMask", "image"): "Invalid image file: {}",
    ("LoadLatent", "latent"): "Invalid latent file: {}",
}
#: Top-level keys of a POST /prompt body beside `prompt`.
BODY_KEYS: Final[frozenset[str]] = frozenset({"prompt", "client_id", "prompt_id", "extra_data", "number", "front",
                                              "partial_execution_targets"})
_MAX_DEPTH: Final[int] = 900


class GraphError(GpuharnessError, ValueError):
    """The document is not an API-format graph (a UI-format workflow, a list, ...)."""


class _Raised(GpuharnessError):
    """A Python exception ComfyUI's validation would raise (its type name and str())."""

    def __init__(self, type_name: str, message: str) -> None:
        self.type_name = type_name
        self.message = message
        super().__init__(message)


@final
@dataclass(frozen=True, slots=True)
class Verdict:
    """What the server answers: accepted (HTTP 200, with node_errors of failed outputs) or rejected (HTTP 400)."""

    accepted: bool
    error: dict[str, Any] | None
    node_errors: dict[str, Any]
    good_outputs: tuple[str, ...] = ()

    @property
    def status(self) -> int:
        return 200 if self.accepted else 400

    def body(self) -> dict[str, Any]:
        """The HTTP 400 body (`{"error", "node_errors"}`) of a rejection."""
        return {"error": self.error, "node_errors": self.node_errors}

    def to_json(self) -> dict[str, Any]:
        return {"accepted": self.accepted, "error": self.error, "node_errors": self.node_errors}


def graph_of(document: Any) -> dict[str, Any]:
    """The API-format graph of a document: the graph itself, or the `prompt` of a POST /prompt body."""
    if isinstance(document, Mapping) and isinstance(document.get("prompt"), Mapping) \
            and set(document) <= BODY_KEYS:
        document = document["prompt"]
    if isinstance(document, Mapping) and isinstance(document.get("nodes"), list) and "links" in document:
        raise GraphError("this is a UI-format workflow (nodes and links), not an API-format graph: in ComfyUI "
                         "use Workflow > Export (API), or Save (API) with dev mode on")
    if not isinstance(document, Mapping):
        raise GraphError(f"not an API-format graph: expected an object of nodes, got {type(document).__name__}")
    if not document:
        raise GraphError("the graph has no nodes")
    return dict(document)


def validate(document: Any, catalog: NodeCatalog, *, targets: list[str] | None = None) -> Verdict:
    """Decide what ComfyUI decides on POST /prompt for this graph (or body) against this catalog.

    targets: ComfyUI's `partial_execution_targets` (only these output nodes). GraphError when the document is
    not a graph at all."""
    graph = graph_of(document)
    outputs: list[str] = []
    for node_id, node in graph.items():
        if not _has_class_type(node):
            return Verdict(False, _error("invalid_prompt", "Cannot execute because a node is missing the "
                                         "class_type property.", f"Node ID '#{node_id}'"), {})
        class_type = node["class_type"]
        known = catalog.get(class_type) if isinstance(class_type, str) else None
        if known is None:
            return Verdict(False, _error("invalid_prompt", f"Cannot execute because node {class_type} does not "
                                         "exist.", f"Node ID '#{node_id}'"), {})
        if known.output_node and (targets is None or node_id in targets):
            outputs.append(node_id)
    if not outputs:
        return Verdict(False, _error("prompt_no_outputs", "Prompt has no outputs", ""), {})
    run = _Run(graph, catalog)
    good: list[str] = []
    failures: list[tuple[str, list[dict[str, Any]]]] = []
    node_errors: dict[str, Any] = {}
    for output in outputs:
        try:
            valid, reasons = run.node(output, 0)
        except _Raised as exc:
            valid = False
            reasons = [{"type": "exception_during_validation", "message": "Exception when validating node",
                        "details": exc.message, "extra_info": {"exception_type": exc.type_name, "traceback": []}}]
            run.validated[output] = (False, reasons)
        if valid:
            good.append(output)
            continue
        failures.append((output, reasons))
        # as the server does: every invalid node with reasons seen so far lists this output as dependent
        for node_id, (node_valid, node_reasons) in run.validated.items():
            if node_valid or not node_reasons:
                continue
            entry = node_errors.setdefault(node_id, {"errors": node_reasons, "dependent_outputs": [],
                                                     "class_type": graph[node_id]["class_type"]})
            entry["dependent_outputs"].append(output)
    if not good:
        details = "\n".join(f"{r['message']}: {r['details']}" for _, reasons in failures for r in reasons)
        return Verdict(False, _error("prompt_outputs_failed_validation", "Prompt outputs failed validation",
                                     details), node_errors)
    return Verdict(True, None, node_errors, tuple(good))


def output_nodes(graph: Mapping[str, Any], catalog: NodeCatalog) -> list[str]:
    """The ids of the graph's output nodes (SaveImage, PreviewImage, ...), in graph order."""
    found = []
    for node_id, node in graph.items():
        known = catalog.get(node["class_type"]) if _has_class_type(node) and isinstance(
            node["class_type"], str) else None
        if known is not None and known.output_node:
            found.append(node_id)
    return found


def _has_class_type(node: Any) -> bool:
    return isinstance(node, Mapping) and "class_type" in node


def _error(kind: str, message: str, details: str) -> dict[str, Any]:
    return {"type": kind, "message": message, "details": details, "extra_info": {}}


@dataclass(slots=True)
class _Run:
    """One validation: the graph, the catalog, and each validated node's (valid, reasons)."""

    graph: dict[str, Any]
    catalog: NodeCatalog
    validated: dict[str, tuple[bool, list[dict[str, Any]]]] = field(default_factory=dict)
    active: set[str] = field(default_factory=set)

    def node(self, node_id: str, depth: int) -> tuple[bool, list[dict[str, Any]]]:
        if node_id in self.validated:
            return self.validated[node_id]
        if node_id in self.active or depth > _MAX_DEPTH:
            raise _Raised("RecursionError", "maximum recursion depth exceeded")
        node = self.graph[node_id]
        if "inputs" not in node:
            raise _Raised("KeyError", "'inputs'")
        inputs = node["inputs"]
        node_class = self.catalog.get(node["class_type"])
        assert node_class is not None  # every class was checked before validation starts
        self.active.add(node_id)
        try:
            errors, valid = self._inputs(node_class.name, node_class.inputs, inputs, depth)
        finally:
            self.active.discard(node_id)
        result = (not errors and valid, errors)
        self.validated[node_id] = result
        return result

    def _inputs(self, class_type: str, specs: tuple[InputSpec, ...], inputs: Any,
                depth: int) -> tuple[list[dict[str, Any]], bool]:
        errors: list[dict[str, Any]] = []
        valid = True
        custom: list[tuple[InputSpec, Any]] = []
        for spec in specs:
            if spec.dynamic:
                continue
            if not _contains(inputs, spec.name):
                if spec.category == "required":
                    errors.append({"type": "required_input_missing", "message": "Required input is missing",
                                   "details": spec.name, "extra_info": {"input_name": spec.name}})
                continue
            value = _item(inputs, spec.name)
            if isinstance(value, list):
                error, linked_ok = self._link(spec, value, depth)
                if error is not None:
                    errors.append(error)
                valid = valid and linked_ok
                continue
            error, value = _value_error(spec, value)
            if error is not None:
                errors.append(error)
                continue
            if (class_type, spec.name) in CUSTOM_VALIDATED:
                custom.append((spec, value))
                continue
            error = _range_error(spec, value) or _list_error(spec, value)
            if error is not None:
                errors.append(error)
        for spec, value in custom:
            if not _on_disk(value, spec.combo_options or []):
                reason = CUSTOM_VALIDATED[(class_type, spec.name)].format(value)
                errors.append({"type": "custom_validation_failed", "message": "Custom validation failed for node",
                               "details": f"{spec.name} - {reason}", "extra_info": {"input_name": spec.name}})
        return errors, valid

    def _link(self, spec: InputSpec, link: list[Any], depth: int) -> tuple[dict[str, Any] | None, bool]:
        """A linked input: (its error, whether the linked node validated)."""
        if len(link) != 2:
            return {"type": "bad_linked_input", "message": "Bad linked input, must be a length-2 list of "
                    "[node_id, slot_index]", "details": spec.name,
                    "extra_info": {"input_name": spec.name, "input_config": spec.config, "received_value": link}}, True
        source_id, index = link
        received = _output_type(self.graph, self.catalog, source_id, index)
        if not types_match(received, spec.type):
            return {"type": "return_type_mismatch", "message": "Return type mismatch between linked nodes",
                    "details": f"{spec.name}, received_type({_py(received)}) mismatch input_type({_py(spec.type)})",
                    "extra_info": {"input_name": spec.name, "input_config": spec.config, "received_type": received,
                                   "linked_node": link}}, True
        try:
            linked_ok, _ = self.node(source_id, depth + 1)
        except _Raised as exc:
            self.validated[source_id] = (False, [{
                "type": "exception_during_inner_validation", "message": "Exception when validating inner node",
                "details": exc.message, "extra_info": {
                    "input_name": spec.name, "input_config": spec.config, "exception_message": exc.message,
                    "exception_type": exc.type_name, "traceback": [], "linked_node": link}}])
            return None, False
        return None, linked_ok


def types_match(received: Any, expected: Any) -> bool:
    """ComfyUI's link type check: equal, a wildcard `*`, or overlapping comma-separated unions."""
    if received == expected:
        return True
    if not isinstance(received, str) or not isinstance(expected, str):
        return False
    got = {t.strip() for t in received.split(",")}
    want = {t.strip() for t in expected.split(",")}
    return "*" in got or "*" in want or bool(got & want)


def _output_type(graph: Mapping[str, Any], catalog: NodeCatalog, source_id: Any, index: Any) -> Any:
    """The type of output `index` of node `source_id`, raising as Python would on a missing node or index."""
    try:
        source = graph[source_id]
    except KeyError:
        raise _Raised("KeyError", repr(source_id)) from None
    except TypeError as exc:  # an unhashable id (a list, an object)
        raise _Raised("TypeError", str(exc)) from None
    node_class = catalog.get(source["class_type"])
    outputs = node_class.outputs if node_class is not None else ()
    try:
        return outputs[index]
    except IndexError:
        raise _Raised("IndexError", "tuple index out of range") from None
    except TypeError:
        raise _Raised("TypeError", f"tuple indices must be integers or slices, not {type(index).__name__}") from None


_CONVERT: Final[Mapping[str, type]] = {"INT": int, "FLOAT": float, "STRING": str, "BOOLEAN": bool}


def _value_error(spec: InputSpec, value: Any) -> tuple[dict[str, Any] | None, Any]:
    """A widget value converted to the input's type as the server converts it: (an error, the value)."""
    if isinstance(value, dict) and "__value__" in value:
        value = value["__value__"]
    convert = _CONVERT.get(spec.type) if isinstance(spec.type, str) else None
    if convert is None:
        return None, value
    try:
        return None, convert(value)
    except Exception as exc:  # Python's own int()/float() messages are the server's
        return {"type": "invalid_input_type", "message": f"Failed to convert an input value to a {spec.type} value",
                "details": f"{spec.name}, {value}, {exc}",
                "extra_info": {"input_name": spec.name, "input_config": spec.config, "received_value": value,
                               "exception_message": str(exc)}}, value


def _range_error(spec: InputSpec, value: Any) -> dict[str, Any] | None:
    for bound, kind, word in (("min", "value_smaller_than_min", "smaller than min"),
                              ("max", "value_bigger_than_max", "bigger than max")):
        if bound not in spec.extra:
            continue
        limit = spec.extra[bound]
        try:
            beyond = value < limit if bound == "min" else value > limit
        except TypeError as exc:
            raise _Raised("TypeError", str(exc)) from None
        if beyond:
            return {"type": kind, "message": f"Value {value} {word} of {limit}", "details": spec.name,
                    "extra_info": {"input_name": spec.name, "input_config": spec.config, "received_value": value}}
    return None


def _list_error(spec: InputSpec, value: Any) -> dict[str, Any] | None:
    options = spec.combo_options
    if options is None or value in options:
        return None
    # the server leaves long lists (scanned model paths) out of the answer
    listed, config = (f"(list of length {len(options)})", None) if len(options) > 20 else (_py(options),
                                                                                           spec.config)
    return {"type": "value_not_in_list", "message": "Value not in list",
            "details": f"{spec.name}: '{value}' not in {listed}",
            "extra_info": {"input_name": spec.name, "input_config": config, "received_value": value}}


def _contains(inputs: Any, name: str) -> bool:
    try:
        return name in inputs
    except TypeError:
        raise _Raised("TypeError", f"argument of type '{type(inputs).__name__}' is not iterable") from None


def _item(inputs: Any, name: str) -> Any:
    try:
        return inputs[name]
    except (TypeError, KeyError, IndexError) as exc:
        raise _Raised(type(exc).__name__, str(exc)) from None


def _on_disk(value: Any, listed: list[Any]) -> bool:
    """A file a loader's own validation finds: listed (input folder), or annotated for the output/temp folder,
    which the catalog does not list."""
    if not isinstance(value, str):
        return value in listed
    if value.endswith((" [output]", " [temp]")):
        return True
    return value.removesuffix(" [input]") in listed


def _py(value: Any) -> str:
    """str() of a value as the server's Python prints it (a list of names as ['a', 'b'])."""
    return str(value)
