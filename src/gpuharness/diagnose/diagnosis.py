"""Classify a failure log into the failure protocol's causes, with the decisive line and the remedy.

``classify_lines`` streams lines in one pass with bounded memory; ``classify_text`` first unpacks ComfyUI and
RunPod Serverless JSON errors. Causes: ``cuda_oom``, ``driver_mismatch``, ``custom_node_import``,
``custom_node_missing``, ``model_missing``, ``weights_corrupt``, ``disk_full``, ``bad_input``, ``unknown``. When
several causes appear the root cause wins (driver > disk full > corrupt weights > OOM > missing model > missing
node class > bad input > custom node import, frequent start-up noise); a host OOM kill or another CUDA error is
``unknown`` with a ``symptom``.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Literal, TextIO, final

from gpuharness.core import regular_file
from gpuharness.core.json_fields import JsonFields
from gpuharness.core.json_text import loads_outside
from gpuharness.core.secrets import clip
from gpuharness.remote.lines import lines_of

Cause = Literal["cuda_oom", "driver_mismatch", "custom_node_import", "custom_node_missing", "model_missing",
                "weights_corrupt", "disk_full", "bad_input", "unknown"]
Symptom = Literal["host_oom_kill", "illegal_memory_access", "cuda_error"]
Source = Literal["log", "comfyui", "runpod", "json"]

CAUSES: Final[tuple[Cause, ...]] = (
    "cuda_oom", "driver_mismatch", "custom_node_import", "custom_node_missing", "model_missing", "weights_corrupt",
    "disk_full", "bad_input", "unknown")

#: The failure protocol's remedy per cause.
REMEDIES: Final[dict[Cause, str]] = {
    "cuda_oom": "GPU out of memory: lower the resolution or batch size, run with --lowvram, use fp8 weights, "
                "or move to a bigger GPU class; never blind-retry",
    "driver_mismatch": "CUDA driver/runtime mismatch: reinstall the torch wheel that matches the image's CUDA "
                       "(pip install torch --index-url https://download.pytorch.org/whl/cuXXX); "
                       "don't rebuild the world",
    "custom_node_import": "a custom node failed to import: pin the node repo to its last known good commit "
                          "(git -C custom_nodes/<node> checkout <sha>) and install its requirements",
    "custom_node_missing": "the server has no node class the workflow uses: install the custom node pack that "
                           "provides it (ComfyUI-Manager), or, if it is installed, fix its import error (read the "
                           "startup log; pin the node repo to its last known good commit), then restart",
    "model_missing": "a model the job names is not where the server looks: put the file in its models/ folder "
                     "(list it in models.json and run gpuharness install) or fix the name in the workflow; for an "
                     "OpenAI-compatible server, start it with the deployment's model",
    "bad_input": "an input file is missing or not a readable image: check the uploaded file and its format; the "
                 "same input fails the same way, so fix it before retrying",
    "weights_corrupt": "weights are corrupt or truncated: re-download with checksum verification "
                       "(sha256 from models.json) and check free disk space",
    "disk_full": "the disk is full: free space (caches, old outputs) or use a bigger volume, then re-download "
                 "anything that was truncated",
    "unknown": "no known cause: read the log tail; retry once, and on a second failure mark the deployment error",
}

#: Extra remedy for unknown-cause symptoms the protocol must not mistake for a CUDA OOM.
SYMPTOM_HINTS: Final[dict[Symptom, str]] = {
    "host_oom_kill": "the host ran out of RAM and the kernel killed the process (not a GPU OOM): "
                     "use a machine or container with more system RAM, or lower CPU-side memory use",
    "illegal_memory_access": "a CUDA kernel faulted (illegal memory access, not an OOM): a software bug or a "
                             "faulty GPU; rerun with CUDA_LAUNCH_BLOCKING=1, check Xid errors, and retry once "
                             "on another instance",
    "cuda_error": "a CUDA error unrelated to memory: rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; "
                  "retry once, then suspect the GPU",
}

#: Root-cause priority when several causes show up in one log (lower wins).
_PRIORITY: Final[dict[str, int]] = {
    "driver_mismatch": 0, "disk_full": 1, "weights_corrupt": 2, "cuda_oom": 3, "model_missing": 4,
    "custom_node_missing": 5, "bad_input": 6, "custom_node_import": 7,
    "host_oom_kill": 10, "illegal_memory_access": 11, "cuda_error": 12,
}

_RETRYABLE: Final[dict[Cause, bool]] = {
    "cuda_oom": False, "driver_mismatch": False, "custom_node_import": False, "custom_node_missing": False,
    "model_missing": False, "weights_corrupt": False, "disk_full": False, "bad_input": False, "unknown": True,
}

# (label, strong, pattern, anchors). Strong lines are decisive; weak ones only count when no strong line exists.
# Anchors are literal substrings, one of which every match of the pattern contains: they let whole batches
# of noise lines be skipped with fast substring scans instead of running the regexes on every line.
_RULES: Final[tuple[tuple[str, bool, str, tuple[str, ...]], ...]] = (
    # -- CUDA OOM (GPU memory only) --
    ("cuda_oom", True, r"CUDA out of memory",
     ('CUDA out of memory',)),
    ("cuda_oom", True, r"OutOfMemoryError: Allocation on device",
     ('Allocation on device',)),
    ("cuda_oom", True, r"!!! Exception during processing ?!!! Allocation on device",
     ('Allocation on device',)),
    ("cuda_oom", True, r"CUDA (?:driver |runtime )?error: out of memory",
     ('out of memory',)),
    ("cuda_oom", True, r"cuda runtime error \(2\) ?: ?out of memory",
     ('out of memory',)),
    ("cuda_oom", True, r"HIP out of memory",
     ('HIP out of memory',)),
    ("cuda_oom", True, r"CUDA_ERROR_OUT_OF_MEMORY|cudaErrorMemoryAllocation",
     ('CUDA_ERROR_OUT_OF_MEMORY', 'cudaErrorMemoryAllocation')),
    ("cuda_oom", True, r"No available memory for the cache blocks",
     ('No available memory for the cache blocks',)),
    ("cuda_oom", True, r"Not enough memory to handle \d+ prefill tokens",
     ('Not enough memory to handle',)),
    ("cuda_oom", False, r"torch\.(?:cuda\.)?OutOfMemoryError",
     ('OutOfMemoryError',)),
    ("cuda_oom", False, r"This error means you ran out of memory on your GPU|Got an OOM, unloading all loaded models",
     ('ran out of memory on your GPU', 'Got an OOM')),
    ("cuda_oom", True, r"CUBLAS_STATUS_ALLOC_FAILED",
     ('CUBLAS_STATUS_ALLOC_FAILED',)),
    ("cuda_oom", True, r"Not enough memory\. Please try to increase --mem-fraction-static",
     ('--mem-fraction-static',)),
    ("cuda_oom", False, r"is larger than the maximum number of tokens that can be stored in KV cache",
     ('stored in KV cache',)),
    ("cuda_oom", True, r"KV cache is needed, which is larger than the available KV cache memory",
     ('larger than the available KV cache memory',)),
    # NCCL and the CUDA runtime/driver APIs by name or by number (cudaErrorMemoryAllocation = CUDA_ERROR_OUT_OF_MEMORY
    # = 2), llama.cpp's allocator, XLA and TensorFlow
    ("cuda_oom", True, r"Cuda failure (?:2 )?'out of memory'|Failed to CUDA calloc|Cuda failure 2\b",
     ("Cuda failure", 'Failed to CUDA calloc')),
    ("cuda_oom", True, r"cudaMalloc(?:Async|Managed)? failed: out of memory|failed to allocate CUDA\d* buffer",
     ('cudaMalloc', 'failed to allocate CUDA')),
    ("cuda_oom", True, r"CUDA error(?: \d+)?[^\n]{0,120}: out of memory|CUDA error 2 at ",
     ('CUDA error',)),
    ("cuda_oom", False, r"unable to allocate (?:CUDA\d*|backend) buffer", ('unable to allocate',)),
    ("cuda_oom", True, r"RESOURCE_EXHAUSTED: Out of memory while trying to allocate|OOM when allocating tensor"
                       r"|hipErrorOutOfMemory",
     ('RESOURCE_EXHAUSTED', 'OOM when allocating', 'hipErrorOutOfMemory')),
    # -- driver / runtime mismatch --
    ("driver_mismatch", True, r"The NVIDIA driver on your system is too old",
     ('driver on your system is too old',)),
    ("driver_mismatch", True, r"CUDA driver version is insufficient for CUDA runtime version"
                              r"|cudaErrorInsufficientDriver|CUDA_ERROR_INSUFFICIENT_DRIVER",
     ('is insufficient for CUDA runtime', 'cudaErrorInsufficientDriver', 'CUDA_ERROR_INSUFFICIENT_DRIVER')),
    ("driver_mismatch", True, r"lib(?:cudart|cublas|cublasLt|cufft|curand|cusparse|cusolver|nvrtc|cudnn)"
                              r"[^ :]*\.so[.0-9]*: cannot open shared object file",
     ('cannot open shared object file',)),
    ("driver_mismatch", True, r"no kernel image is available for execution on the device",
     ('no kernel image is available',)),
    ("driver_mismatch", True, r"with CUDA capability sm_\d+ is not compatible with the current PyTorch installation",
     ('is not compatible with the current PyTorch installation',)),
    ("driver_mismatch", True, r"Torch not compiled with CUDA enabled",
     ('Torch not compiled with CUDA enabled',)),
    ("driver_mismatch", True, r"Driver/library version mismatch",
     ('Driver/library version mismatch',)),
    ("driver_mismatch", True, r"unsatisfied condition: cuda ?>=",
     ('unsatisfied condition: cuda',)),
    ("driver_mismatch", True, r"forward compatibility was attempted on non supported HW",
     ('forward compatibility was attempted',)),
    ("driver_mismatch", True, r"(?:libtorch_cuda|libcudart|libc10_cuda)[^ ]*\.so[^ ]*: undefined symbol",
     ('undefined symbol',)),
    ("driver_mismatch", True, r"[Ee]rror 80[34]\b|\(80[34] vs\. 0\)|system has unsupported display driver / cuda "
                              r"driver combination|cudaErrorSystemDriverMismatch|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH"
                              r"|cudaErrorCompatNotSupportedOnDevice|\(35 vs\. 0\)|CUDA error 35\b",
     ('rror 803', 'rror 804', '803 vs', '804 vs', 'unsupported display driver', 'DriverMismatch',
      'DRIVER_MISMATCH', 'CompatNotSupported', '35 vs', 'CUDA error 35')),
    ("driver_mismatch", False, r"Found no NVIDIA driver on your system",
     ('Found no NVIDIA driver',)),
    # -- ComfyUI custom node import --
    ("custom_node_import", True, r"Cannot import .+ module for custom nodes",
     ('module for custom nodes',)),
    ("custom_node_import", True, r"\(IMPORT FAILED\)",
     ('IMPORT FAILED',)),
    ("custom_node_missing", True, r"missing_node_type|The custom node may not be installed"
                                  r"|Cannot execute because node \S+ does not exist",
     ('missing_node_type', 'The custom node may not be installed', 'does not exist')),
    ("custom_node_import", False, r"module for custom nodes due to the lack of NODE_CLASS_MAPPINGS",
     ('NODE_CLASS_MAPPINGS',)),
    # -- corrupt / truncated weights --
    ("weights_corrupt", True, r"Error while deserializing header",
     ('deserializing header',)),
    ("weights_corrupt", True, r"Consistency check failed: file should be of size",
     ('Consistency check failed',)),
    ("weights_corrupt", True, r"(?:checksum|hash|sha256|sha-256) (?:mismatch|verification failed|does not match)",
     ('mismatch', 'verification failed', 'does not match')),
    ("weights_corrupt", True, r"PytorchStreamReader failed reading zip archive",
     ('PytorchStreamReader',)),
    ("weights_corrupt", True, r"invalid load key, '.'",
     ('invalid load key',)),
    ("weights_corrupt", True, r"unexpected EOF, expected \d+ more bytes\. The file might be corrupted",
     ('unexpected EOF',)),
    ("weights_corrupt", True, r"MetadataIncompleteBuffer|HeaderTooLarge|InvalidHeaderDeserialization",
     ('MetadataIncompleteBuffer', 'HeaderTooLarge', 'InvalidHeaderDeserialization')),
    ("weights_corrupt", False, r"Unable to load weights from pytorch checkpoint file",
     ('Unable to load weights',)),
    # -- a model that is not there: ComfyUI validation (the file is not listed), a served model, a hub id, a path
    ("model_missing", True, r"\b(?:ckpt|unet|vae|lora|clip|clip_name\d|control_net|upscale_model|style_model|gligen"
                            r"|hypernetwork|model|clip_vision|ipadapter|instantid_file|pulid_file)_name\d?: '[^']*' "
                            r"not in ",
     ("_name: '", "_name1: '", "_name2: '")),
    ("model_missing", True, r"The model `[^`]*` does not exist|is not a local folder and is not a valid model "
                            r"identifier|not found, try pulling it first|pull model manifest: file does not exist",
     ('does not exist', 'not a valid model identifier', 'try pulling it first')),
    ("model_missing", True, r"No such file or directory: '[^']*models/[^']*\.(?:safetensors|ckpt|pth?|bin|gguf|sft)'"
                            r"|gguf_init_from_file[^\n]*failed to open",
     ('No such file or directory', 'failed to open')),
    ("model_missing", False, r"does not appear to have a file named", ('does not appear to have a file named',)),
    # -- disk full --
    ("disk_full", True, r"[Nn]o space left on device|\[Errno 28\]|ENOSPC|not enough space on the disk",
     ('o space left on device', '[Errno 28]', 'ENOSPC', 'not enough space on the disk')),
    ("disk_full", True, r"[Dd]isk quota exceeded|\[Errno 122\]",
     ('isk quota exceeded', '[Errno 122]')),
    ("disk_full", True, r"Not enough free disk space to download the file",
     ('Not enough free disk space',)),
    ("disk_full", False, r"database or disk is full",
     ('database or disk is full',)),
    ("disk_full", False, r"PytorchStreamWriter failed writing file",
     ('PytorchStreamWriter',)),
    # -- an input file that is missing or not an image (ComfyUI's LoadImage validation, PIL)
    ("bad_input", True, r"UnidentifiedImageError|cannot identify image file|Invalid image file: "
                        r"|unrecognized data stream contents when reading image file",
     ('UnidentifiedImageError', 'cannot identify image file', 'Invalid image file', 'unrecognized data stream')),
    # -- symptoms that must NOT be taken for a CUDA OOM --
    ("host_oom_kill", True, r"Out of memory: Kill(?:ed)? process|invoked oom-killer|oom-kill:|oom_reaper"
                            r"|Memory cgroup out of memory|OOMKilled|DefaultCPUAllocator: (?:not enough memory"
                            r"|can't allocate memory)",
     ('Out of memory: Kill', 'oom-kill', 'oom_reaper', 'Memory cgroup out of memory', 'OOMKilled',
      'DefaultCPUAllocator')),
    ("host_oom_kill", True, r"(?:^|\s)Killed(?:\s+\S.*)?$|exit(?:ed)? (?:with )?(?:code|status) 137\b"
                            r"|died with <Signals\.SIGKILL: 9>|signal 9 \(SIGKILL\)",
     ('Killed', '137', 'SIGKILL')),
    ("illegal_memory_access", True, r"an illegal memory access was encountered|cudaErrorIllegalAddress"
                                    r"|CUDA_ERROR_ILLEGAL_ADDRESS",
     ('illegal memory access', 'cudaErrorIllegalAddress', 'CUDA_ERROR_ILLEGAL_ADDRESS')),
    ("cuda_error", True, r"CUDA error: |CUBLAS_STATUS_\w+|CUDNN_STATUS_\w+|NCCL error|unspecified launch failure"
                         r"|device-side assert triggered|NVRM: Xid",
     ('CUDA error: ', 'CUBLAS_STATUS_', 'CUDNN_STATUS_', 'NCCL error', 'unspecified launch failure',
      'device-side assert triggered', 'NVRM: Xid')),
)

_COMBINED: Final[re.Pattern[str]] = re.compile("|".join(f"(?:{p})" for _, _, p, _ in _RULES))
_RULE_PATTERNS: Final[tuple[re.Pattern[str], ...]] = tuple(re.compile(p) for _, _, p, _ in _RULES)
_ANCHORS: Final[tuple[str, ...]] = tuple(sorted({a for *_, anchors in _RULES for a in anchors}))
#: Lines scanned together by the anchor pre-filter (bounded memory).
_BATCH_LINES: Final[int] = 4096
_BATCH_BYTES: Final[int] = 1 << 20
#: Files up to this size that start like JSON are tried as ComfyUI / RunPod error documents first.
JSON_MAX_BYTES: Final[int] = 16 << 20
_PEEK_CHARS: Final[int] = 64 << 10
_ANSI: Final[re.Pattern[str]] = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
#: Characters of one line that are examined: its first and last halves of this (progress bars make huge lines).
MAX_LINE_CHARS: Final[int] = 8192
_MAX_EVIDENCE: Final[int] = 20


@final
@dataclass(frozen=True, slots=True)
class Evidence(JsonFields):
    """One matching line: what it indicates, its 1-based number and its text."""

    label: str
    line_no: int
    line: str
    strong: bool


@final
@dataclass(frozen=True, slots=True)
class Diagnosis(JsonFields):
    """The classification of one failure: cause, decisive line, remedy, and whether a blind retry may help."""

    cause: Cause
    line_no: int | None
    line: str | None
    remedy: str
    retryable: bool
    symptom: Symptom | None = None
    source: Source = "log"
    lines_read: int = 0
    evidence: tuple[Evidence, ...] = ()

    def explain(self) -> str:
        """Human text: cause, decisive line, remedy."""
        where = f" (line {self.line_no}: {self.line})" if self.line_no is not None else ""
        head = f"{self.cause}{where}"
        if self.symptom:
            head += f"\nsymptom: {self.symptom}"
        return f"{head}\nremedy: {self.remedy}\nretryable: {'yes' if self.retryable else 'no'}"


def classify_lines(lines: Iterable[str]) -> Diagnosis:
    """Classify a stream of log lines in one pass (bounded memory, any length)."""
    return _classify_batches(_batched(lines))


def _batched(lines: Iterable[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) >= _BATCH_LINES:
            yield batch
            batch = []
    if batch:
        yield batch


def _classify_batches(batches: Iterable[list[str]]) -> Diagnosis:
    best: dict[str, Evidence] = {}  # label -> its first strong (or, failing that, first weak) line
    evidence: list[Evidence] = []
    count = 0
    for batch in batches:
        _scan(batch, count, best, evidence)
        count += len(batch)
    return _decide(best, tuple(evidence), count, "log")


def _scan(batch: list[str], offset: int, best: dict[str, Evidence], evidence: list[Evidence]) -> None:
    """Classify one batch of lines; lines before it number `offset`."""
    block = "\n".join(batch)
    present = [anchor for anchor in _ANCHORS if anchor in block]
    if not present:
        return  # the common case: a batch of noise costs a few substring scans
    for index, raw in enumerate(batch):
        if not any(anchor in raw for anchor in present):
            continue
        # A progress bar can make a megabyte "line": look at its head and its tail only.
        text = raw if len(raw) <= MAX_LINE_CHARS else raw[: MAX_LINE_CHARS // 2] + raw[-MAX_LINE_CHARS // 2 :]
        if "\x1b" in text:
            text = _ANSI.sub("", text)
        if _COMBINED.search(text) is None:
            continue
        line = text.rstrip("\r\n").strip()
        if "\r" in line:  # show the progress-bar segment that matched, not the whole bar
            line = next((part for part in line.split("\r") if _COMBINED.search(part)), line).strip()
        for label, strong in _labels(text):
            found = Evidence(label=label, line_no=offset + index + 1, line=clip(line, 500), strong=strong)
            previous = best.get(label)
            if previous is None or (strong and not previous.strong):
                best[label] = found
            if len(evidence) < _MAX_EVIDENCE:
                evidence.append(found)


def classify_text(text: str) -> Diagnosis:
    """Classify a whole text: a log, or ComfyUI / RunPod error JSON (unpacked to its messages first)."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            document = loads_outside(stripped, what="the log")
        except ValueError:  # not JSON, or nested too deeply (core.json_text): read as text
            document = None
        if document is not None:
            messages, source = _json_messages(document)
            if messages:
                diagnosis = classify_lines(messages)
                return _relocate(diagnosis, text, source)
    return classify_lines(lines_of(text))


def classify_file(path: str | Path) -> Diagnosis:
    """Classify a log file (a regular file: core.regular_file), streaming it (small JSON error documents are read
    whole)."""
    # Only "\n" ends a line, as in editors and `sed -n`: a progress bar's "\r" does not shift line numbers.
    raw = regular_file.open_stream(Path(path), doing="cannot read the log", hint=regular_file.NAMED_HINT)
    with io.TextIOWrapper(raw, encoding="utf-8", errors="replace", newline="\n") as handle:
        return classify_stream(handle)


def classify_stream(handle: TextIO) -> Diagnosis:
    """Classify an open text stream (a file or stdin) with bounded memory.

    Text that starts like JSON and is at most JSON_MAX_BYTES is unpacked as ComfyUI / RunPod error JSON;
    anything else (including a log whose lines start with "[timestamp]") is streamed line by line, a line longer
    than MAX_LINE_CHARS kept as its head and tail (all `_scan` looks at), so a log of any size, and one endless
    line, take bounded memory.
    """
    head = handle.read(_PEEK_CHARS)
    if head.lstrip()[:1] in ("{", "["):
        if len(head) <= JSON_MAX_BYTES:
            head += handle.read(JSON_MAX_BYTES + 1 - len(head))
        if len(head) <= JSON_MAX_BYTES:
            return classify_text(head)
    return _classify_batches(_stream_batches(head, handle))


def _stream_batches(head: str, handle: TextIO) -> Iterator[list[str]]:
    """The lines of head and then the stream, about _BATCH_BYTES at a time (split at C speed, without their
    newlines); a line over MAX_LINE_CHARS is its first and last MAX_LINE_CHARS // 2 characters."""
    keep = MAX_LINE_CHARS // 2
    carry = ""
    long_head: str | None = None  # the head of a line over the cap while the rest of it streams past
    chunk = head
    while chunk:
        lines = (carry + chunk).split("\n")
        carry = lines.pop()
        if lines:
            if long_head is not None:
                lines[0] = long_head + lines[0][-keep:]
                long_head = None
            yield lines
        if len(carry) > MAX_LINE_CHARS:
            if long_head is None:
                long_head = carry[:keep]
            carry = carry[-keep:]
        chunk = handle.read(_BATCH_BYTES)
    if carry or long_head is not None:
        yield [(long_head or "") + carry]


# --- internals -------------------------------------------------------------------------------------------

def _labels(text: str) -> Iterator[tuple[str, bool]]:
    """Every label whose rules match the line (strong if any of its matching rules is strong)."""
    found: dict[str, bool] = {}
    for (label, strong, _, _), pattern in zip(_RULES, _RULE_PATTERNS, strict=True):
        if (label not in found or (strong and not found[label])) and pattern.search(text):
            found[label] = found.get(label, False) or strong
    yield from found.items()


def _decide(best: dict[str, Evidence], evidence: tuple[Evidence, ...], count: int, source: Source) -> Diagnosis:
    if not best:
        return Diagnosis(cause="unknown", line_no=None, line=None, remedy=REMEDIES["unknown"], retryable=True,
                         source=source, lines_read=count, evidence=evidence)
    strong = {k: v for k, v in best.items() if v.strong}
    pool = strong or best
    label = min(pool, key=lambda k: (_PRIORITY[k], pool[k].line_no))
    chosen = pool[label]
    if label in CAUSES:
        cause: Cause = label  # type: ignore[assignment]
        return Diagnosis(cause=cause, line_no=chosen.line_no, line=chosen.line, remedy=REMEDIES[cause],
                         retryable=_RETRYABLE[cause], source=source, lines_read=count, evidence=evidence)
    symptom: Symptom = label  # type: ignore[assignment]
    return Diagnosis(cause="unknown", line_no=chosen.line_no, line=chosen.line,
                     remedy=f"{REMEDIES['unknown']}; {SYMPTOM_HINTS[symptom]}",
                     retryable=symptom != "host_oom_kill", symptom=symptom, source=source, lines_read=count,
                     evidence=evidence)


_COMFY_KEYS = ("exception_type", "exception_message", "traceback")
_RUNPOD_KEYS = ("error_type", "error_message", "error_traceback")


def _json_messages(document: Any) -> tuple[list[str], Source]:
    """The error text inside ComfyUI / RunPod / generic JSON, as lines, in document order."""
    out: list[str] = []
    sources: set[Source] = set()

    def add(text: str) -> None:
        out.extend(lines_of(text) or [text])

    def walk(node: Any, depth: int) -> None:
        if depth > 12:
            return
        if isinstance(node, dict):
            if "node_errors" in node:
                sources.add("comfyui")
            if any(k in node for k in _COMFY_KEYS):
                sources.add("comfyui")
                kind = str(node.get("exception_type") or "")
                message = str(node.get("exception_message") or "")
                add(f"{kind}: {message}" if kind else message)
                trace = node.get("traceback")
                for item in trace if isinstance(trace, list) else [trace] if trace else []:
                    add(str(item))
                return
            if any(k in node for k in _RUNPOD_KEYS):
                sources.add("runpod")
                kind = str(node.get("error_type") or "")
                add(f"{kind}: {node.get('error_message') or ''}" if kind else str(node.get("error_message") or ""))
                if node.get("error_traceback"):
                    add(str(node["error_traceback"]))
                return
            if node.get("type") in ("missing_node_type", "execution_error") and "message" in node:
                sources.add("comfyui")
                add(f"{node['type']}: {node['message']}")
                if node.get("details"):
                    add(str(node["details"]))
                return
            for key, value in node.items():
                if key in ("error", "output", "message", "detail", "details") and isinstance(value, str):
                    nested = _maybe_json(value)
                    if nested is not None:
                        walk(nested, depth + 1)
                    else:
                        add(value)
                        if key == "error":
                            sources.add("runpod" if "status" in node else "json")
                elif isinstance(value, (dict, list)):
                    walk(value, depth + 1)
        elif isinstance(node, list):
            for item in node:
                walk(item, depth + 1)

    walk(document, 0)
    source: Source = "comfyui" if "comfyui" in sources else "runpod" if "runpod" in sources else "json"
    return out, source


def _maybe_json(value: str) -> Any:
    text = value.strip()
    if text[:1] not in ("{", "["):
        return None
    try:
        return loads_outside(text, what="a message")
    except ValueError:
        return None


def _relocate(diagnosis: Diagnosis, text: str, source: Source) -> Diagnosis:
    """Map the decisive message line back to the line of the original JSON text that holds it."""
    line_no: int | None = diagnosis.line_no
    if diagnosis.line:
        line_no = 1
        raw_lines = lines_of(text)
        # The decisive line may be "<type>: <message>" assembled from two fields: try the message alone too.
        candidates = [diagnosis.line[:60]]
        if ": " in diagnosis.line:
            candidates.append(diagnosis.line.split(": ", 1)[1][:60])
        found = False
        for candidate in candidates:
            needle = json.dumps(candidate.strip())[1:-1]
            doubled = json.dumps(needle)[1:-1]  # the message may sit inside a JSON string inside JSON
            for number, raw in enumerate(raw_lines, start=1):
                if needle in raw or doubled in raw:
                    line_no, found = number, True
                    break
            if found:
                break
    return Diagnosis(cause=diagnosis.cause, line_no=line_no, line=diagnosis.line, remedy=diagnosis.remedy,
                     retryable=diagnosis.retryable, symptom=diagnosis.symptom, source=source,
                     lines_read=text.count("\n") + (0 if text.endswith("\n") else 1), evidence=())
