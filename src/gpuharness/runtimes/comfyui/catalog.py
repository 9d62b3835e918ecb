"""A ComfyUI node catalog: the classes a server offers, in the shape of its `GET /object_info` answer."""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, final

from gpuharness.core import json_text, regular_file
from gpuharness.core.errors import GpuharnessError, UserError

InputCategory = Literal["required", "optional"]

#: File extensions of model weights, as ComfyUI's folder_paths lists them.
MODEL_EXTENSIONS: Final[tuple[str, ...]] = (".ckpt", ".pt", ".pt2", ".bin", ".pth", ".safetensors", ".pkl", ".sft",
                                            ".gguf", ".onnx")
_MODEL_INPUT: Final[re.Pattern[str]] = re.compile(r"^(?!sampler_|scheduler)\w*_name\d*$")

#: Model inputs of the core loaders and the models/ folder each lists (ComfyUI's folder_paths names).
MODEL_FOLDERS: Final[Mapping[str, str]] = {
    "ckpt_name": "checkpoints", "vae_name": "vae", "lora_name": "loras", "unet_name": "diffusion_models",
    "clip_name": "text_encoders", "clip_name1": "text_encoders", "clip_name2": "text_encoders",
    "clip_name3": "text_encoders", "clip_name4": "text_encoders", "control_net_name": "controlnet",
    "upscale_model_name": "upscale_models", "style_model_name": "style_models", "gligen_name": "gligen",
    "hypernetwork_name": "hypernetworks", "model_name": "upscale_models",
}


@final
@dataclass(frozen=True, slots=True)
class InputSpec:
    """One declared input: its type (a type name, or the list of allowed values of a v1 combo) and options."""

    name: str
    category: InputCategory
    type: Any
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def combo_options(self) -> list[Any] | None:
        """The allowed values of a combo input (v1: the type is the list; v3: type COMBO with `options`)."""
        if isinstance(self.type, list):
            return self.type
        if self.type == "COMBO":
            options = self.extra.get("options", [])
            return options if isinstance(options, list) else []
        return None

    @property
    def dynamic(self) -> bool:
        """A v3 dynamic input (autogrow, dynamic combo, match type): expanded by the server from the graph."""
        return isinstance(self.type, str) and self.type.startswith("COMFY_") and self.type.endswith("_V3")

    @property
    def config(self) -> list[Any]:
        """The input as ComfyUI reports it in an error's `input_config`: [type, options]."""
        return [self.type, dict(self.extra)]

    def is_model_input(self, value: Any = None) -> bool:
        """A combo that names model files (ckpt_name, lora_name, unet_name, ...)."""
        options = self.combo_options
        if options is None or not _MODEL_INPUT.match(self.name):
            return False
        names = [*options, value]
        return self.name in MODEL_FOLDERS or not options or any(
            isinstance(n, str) and n.lower().endswith(MODEL_EXTENSIONS) for n in names)


@final
@dataclass(frozen=True, slots=True)
class NodeClass:
    """One node class: its inputs in declaration order, its output types, and whether it is an output node."""

    name: str
    inputs: tuple[InputSpec, ...]
    outputs: tuple[Any, ...]
    output_node: bool
    python_module: str = ""

    def input(self, name: str) -> InputSpec | None:
        return next((spec for spec in self.inputs if spec.name == name), None)


class CatalogError(GpuharnessError, ValueError):
    """The document is not an /object_info catalog."""


@final
class NodeCatalog:
    """The node classes of one ComfyUI server (from a saved /object_info answer or a live server)."""

    __slots__ = ("_classes", "document", "source")

    def __init__(self, document: Mapping[str, Any], *, source: str = "catalog") -> None:
        if not isinstance(document, Mapping) or not document:
            raise CatalogError(f"{source}: not an /object_info catalog (expected an object of node classes)")
        self.document: dict[str, Any] = dict(document)
        self.source = source
        self._classes: dict[str, NodeClass] = {}

    @classmethod
    def load(cls, path: str | Path) -> NodeCatalog:
        """A catalog saved from a server (`curl http://HOST:8188/object_info > object_info.json`)."""
        raw = regular_file.read_named(Path(path), what="the catalog")  # a regular file under its cap
        try:
            document = json_text.loads_outside(raw, what="the catalog")
        except ValueError as exc:  # not JSON, or nested too deeply
            raise UserError(str(exc).replace("the catalog: not JSON", "the catalog is not JSON"), path=path) from None
        try:
            catalog = cls(document, source=str(path))
            catalog.check()
        except CatalogError as exc:
            raise UserError(str(exc).split(": ", 1)[-1], path=path,
                            hint="save a server's GET /object_info answer") from None
        return catalog

    def check(self) -> None:
        """Every entry parses as a node class (CatalogError naming the first that does not)."""
        for name in self.document:
            self.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and isinstance(self.document.get(name), Mapping)

    def __len__(self) -> int:
        return len(self.document)

    def __iter__(self) -> Iterator[str]:
        return iter(self.document)

    def get(self, name: str) -> NodeClass | None:
        """The class called name, or None when the server has no such class."""
        if name in self._classes:
            return self._classes[name]
        entry = self.document.get(name)
        if entry is None:
            return None
        node = _node_class(name, entry, self.source)
        self._classes[name] = node
        return node

    def with_model_files(self, files: Mapping[str, Iterable[str]]) -> NodeCatalog:
        """This catalog with each model input listing the files of its folder (folder -> file names), as a
        server lists what is on its disk."""
        document = copy.deepcopy(self.document)
        for entry in document.values():
            for category in ("required", "optional"):
                declared = (entry.get("input") or {}).get(category) or {}
                for input_name, spec in declared.items():
                    folder = MODEL_FOLDERS.get(input_name)
                    if folder is None or not isinstance(spec, list) or not spec or not isinstance(spec[0], list):
                        continue
                    if input_name == "model_name" and entry.get("name") != "UpscaleModelLoader":
                        continue
                    spec[0] = sorted(files.get(folder, ()))
        return NodeCatalog(document, source=self.source)


def _node_class(name: str, entry: Any, source: str) -> NodeClass:
    if not isinstance(entry, Mapping) or not isinstance(entry.get("input", {}), Mapping):
        raise CatalogError(f"{source}: class {name!r} is not a node class entry (no `input` object)")
    inputs: list[InputSpec] = []
    declared = entry.get("input") or {}
    orders = entry.get("input_order") or {}
    for category in ("required", "optional"):
        specs = declared.get(category) or {}
        if not isinstance(specs, Mapping):
            raise CatalogError(f"{source}: class {name!r}: input.{category} is not an object")
        order = [n for n in orders.get(category) or [] if n in specs] + [n for n in specs
                                                                          if n not in (orders.get(category) or [])]
        for input_name in order:
            spec = specs[input_name]
            if not isinstance(spec, list) or not spec:
                raise CatalogError(f"{source}: class {name!r}: input {input_name!r} is not [type, options]")
            extra = spec[1] if len(spec) > 1 and isinstance(spec[1], Mapping) else {}
            inputs.append(InputSpec(input_name, category, spec[0], extra))  # type: ignore[arg-type]
    outputs = entry.get("output") or []
    return NodeClass(name=name, inputs=tuple(inputs), outputs=tuple(outputs) if isinstance(outputs, list) else (),
                     output_node=entry.get("output_node") is True, python_module=str(entry.get("python_module", "")))
