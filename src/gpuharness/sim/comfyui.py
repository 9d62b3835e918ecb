"""The simulated ComfyUI: validates each prompt against a node catalog (the recorded ComfyUI 0.8.0 one by default)
with the harness's own validator, queues it, "executes" it on a poll, and answers in the recorded shapes:
POST /prompt, GET /queue, /history, /view, /object_info, /system_stats. Outputs are real PNGs of the size the
graph asks for. Faults give the real error shapes: a custom node that failed to import (its class is absent),
a missing model (not listed), a corrupt checkpoint (SafetensorError during execution), a CUDA OOM. `SIMULATED` is
ComfyUI's simulator half: these routes, and its service on a simulated host (`python main.py` in ComfyUI/)."""

from __future__ import annotations

import copy
import json
import mimetypes
import os
import random
import re
import struct
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Final, final

from gpuharness.core.runtimes import RUNTIMES
from gpuharness.runtimes.comfyui.catalog import MODEL_EXTENSIONS, MODEL_FOLDERS, NodeCatalog
from gpuharness.runtimes.comfyui.validation import GraphError, graph_of, validate
from gpuharness.sim.simulated_runtime import (
    JSON,
    SERVICE_MAIN,
    UNHEALTHY,
    Answer,
    RuntimeFaults,
    RuntimeSetting,
    ServiceProcess,
    SimulatedRuntime,
)

NAME: Final[str] = "comfyui"

RECORDED_CATALOG: Final[Path] = Path(__file__).with_name("comfyui-0.8.0-object_info.json")
#: A custom node the simulated hosts have installed (RES4LYF's sampler): a KSampler with another name.
CUSTOM_NODE: Final[str] = "ClownsharKSampler_Beta"
OOM_MESSAGE: Final[str] = (
    "Allocation on device \nThis error means you ran out of memory on your GPU.\n\nTIPS: If the workflow worked "
    "before you might have accidentally set the batch_size to a large number.")
#: The frames of the recorded SafetensorError (ComfyUI 0.8.0 loading a corrupt checkpoint).
_LOAD_FRAMES: Final[tuple[str, ...]] = (
    '  File "/workspace/ComfyUI/execution.py", line 518, in execute\n',
    '  File "/workspace/ComfyUI/execution.py", line 329, in get_output_data\n',
    '  File "/workspace/ComfyUI/execution.py", line 303, in _async_map_node_over_list\n',
    '  File "/workspace/ComfyUI/execution.py", line 291, in process_inputs\n    result = f(**inputs)\n',
    '  File "/workspace/ComfyUI/nodes.py", line 585, in load_checkpoint\n',
    '  File "/workspace/ComfyUI/comfy/sd.py", line 1348, in load_checkpoint_guess_config\n',
    '  File "/workspace/ComfyUI/comfy/utils.py", line 64, in load_torch_file\n'
    '    with safetensors.safe_open(ckpt, framework="pt", device=device.type) as f:\n',
)
_SAMPLE_FRAMES: Final[tuple[str, ...]] = (
    '  File "/workspace/ComfyUI/execution.py", line 518, in execute\n',
    '  File "/workspace/ComfyUI/nodes.py", line 1525, in sample\n',
    '  File "/workspace/ComfyUI/comfy/model_management.py", line 1116, in cast_to\n',
)
_MAX_PIXELS: Final[int] = 2048 * 2048


@final
@dataclass(frozen=True, slots=True)
class ComfyFaults:
    """What is wrong with the simulated ComfyUI (see RuntimeFaults, which carries these)."""

    oom: bool = False
    missing_node: str | None = None
    missing_model: bool = False
    corrupt_checkpoint: bool = False
    empty_output: bool = False
    never_finishes: bool = False
    polls_before_done: int = 1
    #: a hostile host: the (subfolder, filename) pairs its /history reports for a saved image instead of the real
    #: name ("../../x.png", "/tmp/x/pwned.txt"); the image is written where that name leads, inside the sandbox
    hostile_names: tuple[tuple[str, str], ...] = ()
    #: a hostile runtime's output: (name suffix, bytes) saved in place of each image (RuntimeFaults.served_output)
    served_output: tuple[str, bytes] | None = None

    @classmethod
    def of(cls, faults: RuntimeFaults) -> ComfyFaults:
        """The faults of a runtime that bear on ComfyUI."""
        return cls(oom=faults.oom, missing_node=faults.missing_node, missing_model=faults.missing_model,
                   corrupt_checkpoint=faults.corrupt_checkpoint, empty_output=faults.empty_output,
                   never_finishes=faults.never_finishes, polls_before_done=faults.polls_before_done,
                   hostile_names=faults.hostile_names, served_output=faults.served_output)


@cache
def recorded_catalog() -> NodeCatalog:
    """The node catalog a real ComfyUI 0.8.0 served (CPU build, two checkpoints, three input images)."""
    return NodeCatalog(json.loads(RECORDED_CATALOG.read_text(encoding="utf-8")), source=str(RECORDED_CATALOG))


def with_custom_node(catalog: NodeCatalog) -> NodeCatalog:
    """The catalog plus the simulated hosts' custom node (a KSampler under another name)."""
    document = dict(catalog.document)
    entry = copy.deepcopy(document["KSampler"])
    entry.update(name=CUSTOM_NODE, display_name="ClownsharKSampler", python_module="custom_nodes.RES4LYF",
                 category="RES4LYF/samplers")
    document[CUSTOM_NODE] = entry
    return NodeCatalog(document, source=catalog.source)


def png_bytes(width: int = 8, height: int = 8, *, rgb: tuple[int, int, int] = (128, 128, 128),
              noise_seed: int | None = None, text: Mapping[str, str] | None = None) -> bytes:
    """A PNG (8-bit RGB) per the PNG spec: a solid colour, or seeded noise (as incompressible as a generated image);
    `text` becomes tEXt chunks (ComfyUI stores the prompt there)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    if noise_seed is not None and width * height <= _MAX_PIXELS:
        pixels = random.Random(noise_seed).randbytes(width * height * 3)
        raw = b"".join(b"\x00" + pixels[row * width * 3:(row + 1) * width * 3] for row in range(height))
        level = 1
    else:
        raw = (b"\x00" + bytes(rgb) * width) * height
        level = 6
    texts = b"".join(chunk(b"tEXt", key.encode("latin-1") + b"\x00" + value.encode("latin-1", "replace"))
                     for key, value in (text or {}).items())
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)) + texts
            + chunk(b"IDAT", zlib.compress(raw, level)) + chunk(b"IEND", b""))


def safetensors_bytes(values: int = 16, *, seed: int = 0) -> bytes:
    """A small valid .safetensors file (one F32 tensor): loads where a real checkpoint would."""
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "weight": {"dtype": "F32", "shape": [values], "data_offsets": [0, 4 * values]}}).encode()
    header += b" " * (-len(header) % 8)
    data = struct.pack(f"<{values}f", *(random.Random(seed).random() for _ in range(values)))
    return struct.pack("<Q", len(header)) + header + data


def safetensors_error(path: Path | None, name: str) -> str | None:
    """The SafetensorError message a checkpoint raises on load, or None when its header reads (no file: the
    recorded host's names tell)."""
    if path is None or not path.is_file():
        if "corrupt" in name:
            return "Error while deserializing header: header too large"
        if "truncated" in name:
            return "Error while deserializing header: incomplete metadata, file not fully covered"
        return None
    if not name.endswith((".safetensors", ".sft")):
        return None
    with path.open("rb") as handle:
        head = handle.read(8)
        size = path.stat().st_size
        if len(head) < 8:
            return "Error while deserializing header: header too small"
        length = struct.unpack("<Q", head)[0]
        if length > 100_000_000:
            return "Error while deserializing header: header too large"
        if 8 + length > size:
            return "Error while deserializing header: invalid header length"
        try:
            header = json.loads(handle.read(length))
        except ValueError:
            return "Error while deserializing header: invalid JSON in header"
    ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__" and isinstance(v, dict)
            and isinstance(v.get("data_offsets"), list)]
    if 8 + length + max(ends, default=0) != size:
        return "Error while deserializing header: incomplete metadata, file not fully covered"
    return None


@dataclass(slots=True)
class _Job:
    number: int
    prompt_id: str
    graph: dict[str, Any]
    extra: dict[str, Any]
    outputs: list[str]
    polls: int = 0
    entry: dict[str, Any] | None = None


@final
class SimComfyUI:
    """The queue, history and files of one simulated ComfyUI. faults() is read on every request (faults may be
    replaced while it runs)."""

    def __init__(self, faults: Callable[[], ComfyFaults], *, output_root: Path | None = None,
                 models_root: Path | None = None, catalog: NodeCatalog | None = None) -> None:
        self.faults = faults
        self.output_root = output_root
        self.models_root = models_root
        self.base = with_custom_node(catalog or recorded_catalog())
        self.jobs: dict[str, _Job] = {}
        self.lock = threading.Lock()
        self.number = 0
        self.files: dict[str, bytes] = {}  # output files when there is no output_root
        self._served: tuple[Any, NodeCatalog] | None = None  # the last catalog built, and what it was built from

    # --- the catalog this server has now
    def catalog(self) -> NodeCatalog:
        """The classes and model files the server has now (rebuilt only when its files or faults changed)."""
        faults = self.faults()
        files = None if faults.missing_model else self._model_files()
        key = (faults.missing_model, faults.missing_node, self.models_root is not None,
               tuple(sorted((folder, tuple(names)) for folder, names in (files or {}).items())))
        served = self._served
        if served is not None and served[0] == key:
            return served[1]
        catalog = self.base
        if self.models_root is not None or faults.missing_model:
            catalog = catalog.with_model_files(files or {})
        if faults.missing_node and faults.missing_node in catalog:
            document = {k: v for k, v in catalog.document.items() if k != faults.missing_node}
            catalog = NodeCatalog(document, source=catalog.source)
        self._served = (key, catalog)
        return catalog

    def _model_files(self) -> dict[str, list[str]]:
        root = self.models_root
        found: dict[str, list[str]] = {}
        if root is None:
            return found
        for folder in set(MODEL_FOLDERS.values()):
            base = root / folder
            if base.is_dir():
                found[folder] = sorted(str(p.relative_to(base)) for p in base.rglob("*")
                                       if p.is_file() and p.name.lower().endswith(MODEL_EXTENSIONS))
        return found

    def object_info(self, name: str | None = None) -> dict[str, Any]:
        document = self.catalog().document
        if name is None:
            return document
        return {name: document[name]} if name in document else {}

    # --- POST /prompt
    def prompt(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or "prompt" not in body:
            return 400, {"error": {"type": "no_prompt", "message": "No prompt provided",
                                   "details": "No prompt provided", "extra_info": {}}, "node_errors": {}}
        targets = body.get("partial_execution_targets")
        try:
            graph = graph_of(body["prompt"])
        except GraphError as exc:
            return 400, {"error": {"type": "invalid_prompt", "message": str(exc), "details": "", "extra_info": {}},
                         "node_errors": {}}
        verdict = validate(graph, self.catalog(), targets=targets if isinstance(targets, list) else None)
        if not verdict.accepted:
            return 400, verdict.body()
        prompt_id = str(body.get("prompt_id") or uuid.uuid4())
        extra = {"client_id": body["client_id"]} if body.get("client_id") else {}
        extra["create_time"] = int(time.time() * 1000)
        with self.lock:
            self.number += 1
            self.jobs[prompt_id] = _Job(self.number, prompt_id, graph, extra, list(verdict.good_outputs))
        return 200, {"prompt_id": prompt_id, "number": self.number, "node_errors": verdict.node_errors}

    # --- GET /queue, POST /queue, POST /interrupt
    def queue(self) -> dict[str, Any]:
        with self.lock:
            waiting = [job for job in self.jobs.values() if job.entry is None]
        items = [[job.number, job.prompt_id, job.graph, job.extra, job.outputs] for job in waiting]
        return {"queue_running": items[:1], "queue_pending": items[1:]}

    def forget(self, body: Any) -> None:
        """POST /queue {"delete": [ids]} or {"clear": true}: drop queued prompts."""
        with self.lock:
            doomed = [k for k, job in self.jobs.items() if job.entry is None and isinstance(body, dict) and (
                body.get("clear") or k in (body.get("delete") or []))]
            for key in doomed:
                del self.jobs[key]

    # --- GET /history[/id]
    def history(self, prompt_id: str | None = None) -> dict[str, Any]:
        with self.lock:
            jobs = [self.jobs[prompt_id]] if prompt_id in self.jobs else [] if prompt_id else list(self.jobs.values())
        answer = {}
        for job in jobs:
            entry = self._advance(job)
            if entry is not None:
                answer[job.prompt_id] = entry
        return answer

    def _advance(self, job: _Job) -> dict[str, Any] | None:
        faults = self.faults()
        with self.lock:
            if job.entry is not None:
                return job.entry
            job.polls += 1
            if faults.never_finishes or job.polls <= faults.polls_before_done:
                return None
        entry = self._execute(job, faults)
        with self.lock:
            job.entry = entry
        return entry

    def _execute(self, job: _Job, faults: ComfyFaults) -> dict[str, Any]:
        started = int(time.time() * 1000)
        entry: dict[str, Any] = {"prompt": [job.number, job.prompt_id, job.graph, job.extra, job.outputs],
                                 "outputs": {}, "meta": {}}
        messages: list[list[Any]] = [["execution_start", {"prompt_id": job.prompt_id, "timestamp": started}],
                                     ["execution_cached", {"nodes": [], "prompt_id": job.prompt_id,
                                                           "timestamp": started}]]
        failure = self._failure(job, faults)
        if failure is not None:
            failure.update(prompt_id=job.prompt_id, executed=[], current_outputs=list(job.graph),
                           timestamp=started + 2)
            messages.append(["execution_error", failure])
            entry["status"] = {"status_str": "error", "completed": False, "messages": messages}
            return entry
        for node_id in job.outputs:
            images = self._save(job, node_id, faults)
            if images:
                entry["outputs"][node_id] = {"images": images}
                entry["meta"][node_id] = {"node_id": node_id, "display_node": node_id, "parent_node": None,
                                          "real_node_id": node_id}
        messages.append(["execution_success", {"prompt_id": job.prompt_id, "timestamp": started + 2}])
        entry["status"] = {"status_str": "success", "completed": True, "messages": messages}
        return entry

    def _failure(self, job: _Job, faults: ComfyFaults) -> dict[str, Any] | None:
        """The execution_error a node raises, if one does: a checkpoint that does not load, else a CUDA OOM in
        the first sampler (or the first node to run)."""
        order = execution_order(job.graph, job.outputs)
        for node_id in order:
            node = job.graph[node_id]
            name = node["inputs"].get("ckpt_name")
            if not isinstance(name, str):
                continue
            path = self.models_root / "checkpoints" / name if self.models_root is not None else None
            message = ("Error while deserializing header: header too large" if faults.corrupt_checkpoint
                       else safetensors_error(path, name))
            if message is not None:
                return {"node_id": node_id, "node_type": node["class_type"], "exception_message": message + "\n",
                        "exception_type": "safetensors._safetensors_rust.SafetensorError",
                        "traceback": list(_LOAD_FRAMES), "current_inputs": {"ckpt_name": [name]}}
        if faults.oom and order:
            node_id = next((n for n in order if "Sampler" in str(job.graph[n]["class_type"])), order[0])
            return {"node_id": node_id, "node_type": job.graph[node_id]["class_type"],
                    "exception_message": OOM_MESSAGE, "exception_type": "torch.OutOfMemoryError",
                    "traceback": list(_SAMPLE_FRAMES), "current_inputs": {}}
        return None

    def _save(self, job: _Job, node_id: str, faults: ComfyFaults) -> list[dict[str, str]]:
        node = job.graph[node_id]
        if node["class_type"] not in ("SaveImage", "PreviewImage"):
            return []
        width, height, batch, rgb, seed = image_facts(job.graph, node_id)
        preview = node["class_type"] == "PreviewImage"
        prefix = "ComfyUI_temp" if preview else str(node["inputs"].get("filename_prefix", "ComfyUI"))
        subfolder, _, stem = prefix.rpartition("/")
        if ".." in prefix or prefix.startswith("/"):
            subfolder, stem = "", "ComfyUI"
        kind = "temp" if preview else "output"
        suffix, served = faults.served_output or (".png", None)
        images = []
        for index in range(batch):
            name = self._next_name(kind, subfolder, stem, suffix)
            data = b"" if faults.empty_output else served if served is not None else png_bytes(
                width, height, rgb=rgb, noise_seed=None if seed is None else seed + index,
                text={"prompt": json.dumps(job.graph)})
            self._store(kind, subfolder, name, data)
            images.append({"filename": name, "subfolder": subfolder, "type": kind})
        if faults.hostile_names and not preview:
            return [self._hostile(sub, name, png_bytes(8, 8)) for sub, name in faults.hostile_names]
        return images

    def _hostile(self, subfolder: str, name: str, data: bytes) -> dict[str, str]:
        """A history entry naming a file outside the output folder; the file is there on the host when that place
        is inside the host's sandbox (a client joins the names as text: output/<subfolder>/<name>)."""
        folder = self._folder("output")
        if folder is not None:
            target = Path(os.path.normpath(f"{folder}/{subfolder}/{name}"))
            sandbox = folder.parent.parent
            if sandbox in target.parents:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(data)
        return {"filename": name, "subfolder": subfolder, "type": "output"}

    def _next_name(self, kind: str, subfolder: str, stem: str, suffix: str = ".png") -> str:
        pattern = re.compile(re.escape(stem) + r"_(\d{5})_" + re.escape(suffix) + "$")
        with self.lock:
            taken = [int(m.group(1)) for name in self._listing(kind, subfolder) if (m := pattern.match(name))]
            number = max(taken, default=0) + 1
            name = f"{stem}_{number:05d}_{suffix}"
            self.files.setdefault(f"{kind}/{subfolder}/{name}", b"")
        return name

    def _listing(self, kind: str, subfolder: str) -> list[str]:
        prefix = f"{kind}/{subfolder}/"
        names = [key[len(prefix):] for key in self.files if key.startswith(prefix)]
        folder = self._folder(kind)
        if folder is not None and (folder / subfolder).is_dir():
            names += [p.name for p in (folder / subfolder).iterdir()]
        return names

    def _folder(self, kind: str) -> Path | None:
        if self.output_root is None:
            return None
        return self.output_root if kind == "output" else self.output_root.parent / kind

    def _store(self, kind: str, subfolder: str, name: str, data: bytes) -> None:
        folder = self._folder(kind)
        if folder is None:
            self.files[f"{kind}/{subfolder}/{name}"] = data
            return
        target = folder / subfolder / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    # --- GET /view
    def view(self, query: Mapping[str, list[str]]) -> tuple[int, bytes]:
        name = (query.get("filename") or [""])[0]
        subfolder = (query.get("subfolder") or [""])[0]
        kind = (query.get("type") or ["output"])[0]
        if not name or name.startswith("/") or ".." in name or ".." in subfolder or kind not in ("output", "temp",
                                                                                                  "input"):
            return 400, b""
        key = f"{kind}/{subfolder}/{name}"
        if key in self.files and self._folder(kind) is None:
            return 200, self.files[key]
        folder = self._folder(kind)
        path = folder / subfolder / name if folder is not None else None
        if path is None or not path.is_file():
            return 404, b""
        return 200, path.read_bytes()

    # --- GET /system_stats
    def system_stats(self, device: str, vram_mib: int) -> dict[str, Any]:
        vram = vram_mib * 1024 * 1024
        return {"system": {"os": "linux", "ram_total": 67430924288, "ram_free": 60129542144,
                           "comfyui_version": "0.8.0", "required_frontend_version": "1.35.9",
                           "installed_templates_version": "0.7.67", "required_templates_version": "0.7.67",
                           "python_version": "3.12.9 (main, Feb  4 2025, 14:38:38) [GCC 12.2.0]",
                           "pytorch_version": "2.7.1+cu128", "embedded_python": False,
                           "argv": ["main.py", "--listen", "0.0.0.0", "--port", "8188"]},
                "devices": [{"name": f"cuda:0 {device} : cudaMallocAsync", "type": "cuda", "index": 0,
                             "vram_total": vram, "vram_free": vram - 1_073_741_824, "torch_vram_total": 0,
                             "torch_vram_free": 0}]}

    def queue_remaining(self) -> int:
        with self.lock:
            return sum(1 for job in self.jobs.values() if job.entry is None)


def execution_order(graph: Mapping[str, Any], outputs: list[str]) -> list[str]:
    """The nodes the outputs need, each after the nodes it links to (depth first, as ComfyUI walks them)."""
    order: list[str] = []
    seen: set[str] = set()

    def visit(node_id: str) -> None:
        if node_id in seen or node_id not in graph:
            return
        seen.add(node_id)
        for value in (graph[node_id].get("inputs") or {}).values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                visit(value[0])
        order.append(node_id)

    for output in outputs:
        visit(output)
    return order


def image_facts(graph: Mapping[str, Any], node_id: str) -> tuple[int, int, int, tuple[int, int, int], int | None]:
    """(width, height, batch, colour, noise seed) of the images an output node saves: from the first node upstream
    that sets width and height (EmptyImage, EmptyLatentImage, ImageScale, ...); sampled images are noise."""
    seed: int | None = None
    current = node_id
    for _ in range(64):
        inputs = graph[current].get("inputs") or {}
        if "seed" in inputs or "noise_seed" in inputs:
            seed = int(inputs.get("seed", inputs.get("noise_seed")) or 0)
        width, height = inputs.get("width"), inputs.get("height")
        if isinstance(width, int) and isinstance(height, int) and not isinstance(width, bool):
            batch = inputs.get("batch_size", 1)
            color = inputs.get("color", 0x808080 if seed is None else 0)
            rgb = ((int(color) >> 16) & 255, (int(color) >> 8) & 255, int(color) & 255)
            return (max(1, min(width, 8192)), max(1, min(height, 8192)), max(1, min(int(batch), 16)), rgb, seed)
        links = [v[0] for v in inputs.values() if isinstance(v, list) and len(v) == 2 and v[0] in graph]
        preferred = [inputs[k][0] for k in ("samples", "latent_image", "images", "image", "pixels")
                     if isinstance(inputs.get(k), list) and inputs[k][0] in graph]
        if not (preferred or links):
            break
        current = (preferred or links)[0]
    return 512, 512, 1, (128, 128, 128), seed


#: Small GETs of the ComfyUI frontend, as the recorded 0.8.0 server answered them.
RECORDED_GETS: Final[dict[str, Any]] = {
    "/features": {"supports_preview_metadata": True, "max_upload_size": 104857600,
                  "extension": {"manager": {"supports_v4": True}}},
    "/embeddings": [],
    "/extensions": ["/extensions/core/groupNode.js", "/extensions/core/clipspace.js",
                    "/extensions/core/widgetInputs.js"],
}


@final
class ComfyServer:
    """ComfyUI's routes over one SimComfyUI (`comfy`), which validates against the setting's catalog (the recorded
    one by default) and lists the model files under its models_root when given."""

    def __init__(self, setting: RuntimeSetting) -> None:
        self.setting = setting
        self.comfy = SimComfyUI(lambda: ComfyFaults.of(setting.faults()), output_root=setting.output_root,
                                models_root=setting.models_root, catalog=setting.catalog)

    def respond(self, method: str, path: str, query: Mapping[str, list[str]], body: Any) -> Answer:
        if self.setting.faults().health_down:
            return UNHEALTHY
        comfy = self.comfy
        if path == "/prompt":
            if method == "POST":
                return (*comfy.prompt(body), JSON)
            return 200, {"exec_info": {"queue_remaining": comfy.queue_remaining()}}, JSON
        if path == "/history" or path.startswith("/history/"):
            return 200, comfy.history(path[len("/history/"):] or None), JSON
        if path == "/view":  # the type its name gives (ComfyUI's /view answers with mimetypes' guess)
            status, data = comfy.view(query)
            name = (query.get("filename") or [""])[0]
            return status, data, mimetypes.guess_type(name)[0] or "application/octet-stream"
        if path == "/queue":
            if method == "POST":
                comfy.forget(body)
                return 200, b"", "text/plain"
            return 200, comfy.queue(), JSON
        if path == "/interrupt" and method == "POST":
            return 200, b"", "text/plain"
        if path == "/object_info" or path.startswith("/object_info/"):
            return 200, comfy.object_info(path[len("/object_info/"):] or None), JSON
        if path == "/system_stats":
            return 200, comfy.system_stats(*self.setting.gpu), JSON
        if path in RECORDED_GETS:
            return 200, RECORDED_GETS[path], JSON
        return 404, b"404: Not Found", "text/plain"


SIMULATED: Final = SimulatedRuntime(
    ComfyServer,
    service=ServiceProcess(("main.py", "--listen", "0.0.0.0", "--port", str(RUNTIMES[NAME].port)),
                           files={"main.py": SERVICE_MAIN}))
