"""torch as a simulated host's service interpreter meets it: the calls of the CUDA smoke test and of the GPU
measurement, on a virtual clock that runs at the simulated card's figures. A simulated host copies this file into
its service's virtual environment as `torch/__init__.py`, beside `_gpuharness_sim.json` (what the card is).

Its clock behaves as a real card's does where timing matters (the real H200 run, docs/gpu-calibration.md):
the first operations on a device run slow (clocks ramp up from idle: COLD_OPS at COLD), work queued past BURST_S
without a synchronisation runs at the sustained, power-managed rate (SUSTAINED: 683 of 784 TFLOP/s there), and
one operation in JITTER_EVERY is disturbed (JITTER slower): a careful measurement (warm-ups, each run timed alone,
a mean or median) reads the card's figure; a cold loop timed as a whole reads low.

It refuses what torch refuses: CUDA calls where no GPU is visible, allocations past the free memory, copies
between tensors of different sizes, matmuls of mismatched shapes. It imports nothing from gpuharness."""

from __future__ import annotations

import atexit
import json
import math
from pathlib import Path
from typing import Any

_CONFIG: dict[str, Any] = json.loads((Path(__file__).with_name("_gpuharness_sim.json")).read_text())
__version__: str = _CONFIG["torch"]
_MIB = 1 << 20


class version:  # torch's own lower-case names
    cuda: str | None = _CONFIG["cuda"]


class OutOfMemoryError(RuntimeError):
    """torch.OutOfMemoryError."""


class dtype:
    def __init__(self, name: str, size: int) -> None:
        self.name, self.itemsize = name, size

    def __repr__(self) -> str:
        return f"torch.{self.name}"


uint8, float16, bfloat16, float32 = dtype("uint8", 1), dtype("float16", 2), dtype("bfloat16", 2), dtype("float32", 4)
_clock: dict[int, float] = {}  # virtual seconds of work done on each device
_ops: dict[int, int] = {}  # operations run on each device
_burst: dict[int, float] = {}  # virtual seconds queued on each device since its last synchronisation
COLD_OPS, COLD = 2, 0.6
BURST_S, SUSTAINED = 0.005, 683.2 / 783.8
JITTER_EVERY, JITTER = 5, 1.1
_allocated: dict[int, int] = {}


class device:
    type: str
    index: int | None

    def __init__(self, kind: str | device, index: int | None = None) -> None:
        text = kind if isinstance(kind, str) else f"{kind.type}:{kind.index}"
        name, _, number = text.partition(":")
        self.type = name
        self.index = index if index is not None else (int(number) if number else (0 if name == "cuda" else None))


def _device(where: Any) -> device:
    return where if isinstance(where, device) else device(str(where or "cpu"))


def _require_cuda() -> None:
    if not _CONFIG["devices"]:
        raise RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                           "installed a driver from http://www.nvidia.com/Download/index.aspx")


class Tensor:
    def __init__(self, shape: tuple[int, ...], kind: dtype, where: device, pinned: bool = False,
                 error: float = 0.0) -> None:
        self.shape, self.dtype, self.device, self.pinned, self.error = shape, kind, where, pinned, error
        self.nbytes = math.prod(shape) * kind.itemsize
        if where.type == "cuda":
            _require_cuda()
            index = where.index or 0
            free = cuda.mem_get_info(index)[0]
            if self.nbytes > free:
                total = _CONFIG["total_mib"] / 1024
                raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {self.nbytes / _MIB:.2f} MiB. GPU "
                                       f"{index} has a total capacity of {total:.2f} GiB of which "
                                       f"{free / _MIB:.2f} MiB is free.")
            _allocated[index] = _allocated.get(index, 0) + self.nbytes

    def __del__(self) -> None:
        if self.device.type == "cuda":
            index = self.device.index or 0
            _allocated[index] = _allocated.get(index, 0) - self.nbytes

    def copy_(self, source: Tensor, non_blocking: bool = False) -> Tensor:
        if source.nbytes != self.nbytes:
            raise RuntimeError(f"The size of tensor a ({self.nbytes}) must match the size of tensor b "
                               f"({source.nbytes})")
        kinds = (source.device.type, self.device.type)
        on = self.device if self.device.type == "cuda" else source.device
        figures = _figures(on.index or 0)
        if kinds == ("cuda", "cuda") and (source.device.index or 0) != (self.device.index or 0):
            _work(source.device.index or 0, self.nbytes / (_peer(source.device.index or 0, self.device.index or 0)
                                                           ["gbps"] * 1e9))
            return self
        if kinds == ("cpu", "cuda"):
            rate = figures["h2d_gbps"] * (1.0 if source.pinned else 0.5)
        elif kinds == ("cuda", "cpu"):
            rate = figures["d2h_gbps"] * (1.0 if self.pinned else 0.5)
        elif kinds == ("cuda", "cuda"):
            rate = figures["device_copy_gbps"] / 2  # read and write: the copy's bytes cross memory twice
        else:
            return self
        _work(on.index or 0, self.nbytes / (rate * 1e9))
        return self

    # the CUDA smoke test's calls
    def cuda(self) -> Tensor:
        return Tensor(self.shape, self.dtype, device("cuda", 0), error=_CONFIG["smoke_error"])

    def cpu(self) -> Tensor:
        return Tensor(self.shape, self.dtype, device("cpu"), error=self.error)

    def __matmul__(self, other: Tensor) -> Tensor:
        return matmul(self, other)

    def __sub__(self, other: Tensor) -> Tensor:
        return Tensor(self.shape, self.dtype, device("cpu"), error=abs(self.error - other.error))

    def abs(self) -> Tensor:
        return self

    def max(self) -> Tensor:
        return self

    def __float__(self) -> float:
        return float(self.error)


def _figures(index: int) -> dict[str, Any]:
    """What device `index` reaches (a pod's GPUs may differ: one on a degraded link)."""
    per_device: list[dict[str, Any]] = _CONFIG.get("per_device") or []
    chosen: dict[str, Any] = per_device[index] if index < len(per_device) else _CONFIG["figures"]
    return chosen


def _peer(a: int, b: int) -> dict[str, Any]:
    """The pair's peer access and copy rate (a pair the configuration does not name: peer access off)."""
    found = (_CONFIG.get("peers") or {}).get(f"{min(a, b)}-{max(a, b)}")
    return found if found is not None else {"access": False, "gbps": _figures(a)["h2d_gbps"] * 0.7}


def _work(index: int, seconds: float) -> None:
    count = _ops[index] = _ops.get(index, 0) + 1
    if count <= COLD_OPS:
        seconds /= COLD
    if count % JITTER_EVERY == 0:
        seconds *= JITTER
    if _burst.get(index, 0.0) > BURST_S:
        seconds /= SUSTAINED
    _burst[index] = _burst.get(index, 0.0) + seconds
    _clock[index] = _clock.get(index, 0.0) + seconds


def _settle(index: int) -> None:
    """The device ran dry: what is queued next starts a new burst."""
    _burst[index] = 0.0


def _busy(index: int) -> Path:
    return Path(_CONFIG["busy_dir"]) / f"gpu-busy-{index}"


@atexit.register
def _idle() -> None:
    for index in range(_CONFIG["devices"]):
        _busy(index).unlink(missing_ok=True)


def empty(*size: int, dtype: dtype = float32, device: Any = None, pin_memory: bool = False) -> Tensor:
    if pin_memory:
        _require_cuda()
    return Tensor(tuple(size), dtype, _device(device), pinned=pin_memory)


def randn(*size: int, device: Any = None, dtype: dtype = float32) -> Tensor:
    return Tensor(tuple(size), dtype, _device(device))


def manual_seed(seed: int) -> None:
    return None


def matmul(a: Tensor, b: Tensor, out: Tensor | None = None) -> Tensor:
    if a.shape[-1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({a.shape[0]}x{a.shape[-1]} and "
                           f"{b.shape[0]}x{b.shape[-1]})")
    if a.device.type != b.device.type:
        raise RuntimeError("Expected all tensors to be on the same device")
    result = out or Tensor((a.shape[0], b.shape[-1]), a.dtype, a.device, error=max(a.error, b.error))
    if a.device.type == "cuda":
        index = a.device.index or 0
        rate = _figures(index)["matmul_tflops"]
        if a.dtype is float32 or (a.dtype is bfloat16 and not _CONFIG["bf16"]):
            rate /= 16  # no tensor cores for it
        _work(index, 2.0 * a.shape[0] * a.shape[-1] * b.shape[-1] / (rate * 1e12))
        _busy(index).touch()
    return result


class _Properties:
    def __init__(self, index: int) -> None:
        self.name: str = _CONFIG["name"]
        self.major, self.minor = (8, 9) if _CONFIG["bf16"] else (7, 5)
        self.total_memory: int = _CONFIG["total_mib"] * _MIB
        self.multi_processor_count = 128
        self.pci_domain_id, self.pci_bus_id, self.pci_device_id = 0, 1 + index, 0


class _Event:
    def __init__(self, enable_timing: bool = False) -> None:
        self.at: float | None = None
        self.on = cuda.current
        self.timing = enable_timing

    def record(self, stream: Any = None) -> None:
        self.on = cuda.current
        self.at = _clock.get(self.on, 0.0)

    def synchronize(self) -> None:
        _settle(self.on)

    def query(self) -> bool:
        return True

    def elapsed_time(self, end: _Event) -> float:
        if not (self.timing and end.timing) or self.at is None or end.at is None:
            raise RuntimeError("Both events must be recorded with enable_timing=True")
        return (end.at - self.at) * 1000.0


class cuda:
    current = 0
    Event = _Event
    OutOfMemoryError = OutOfMemoryError

    @staticmethod
    def is_available() -> bool:
        return bool(_CONFIG["devices"])

    @staticmethod
    def device_count() -> int:
        return int(_CONFIG["devices"])

    @staticmethod
    def can_device_access_peer(device: int, peer: int) -> bool:
        _require_cuda()
        return bool(_peer(device, peer)["access"]) and device != peer

    @staticmethod
    def is_bf16_supported() -> bool:
        return bool(_CONFIG["devices"])  # as torch does, where bf16 is only emulated too

    @staticmethod
    def get_device_name(index: Any = 0) -> str:
        _require_cuda()
        return str(_CONFIG["name"])

    @staticmethod
    def get_device_properties(index: Any = 0) -> _Properties:
        _require_cuda()
        return _Properties(index if isinstance(index, int) else _device(index).index or 0)

    @staticmethod
    def mem_get_info(index: Any = None) -> tuple[int, int]:
        _require_cuda()
        number = cuda.current if index is None else (index if isinstance(index, int) else _device(index).index or 0)
        total = _CONFIG["total_mib"] * _MIB
        return total - _CONFIG["used_mib"] * _MIB - _allocated.get(number, 0), total

    @staticmethod
    def set_device(index: Any) -> None:
        _require_cuda()
        cuda.current = index if isinstance(index, int) else _device(index).index or 0

    @staticmethod
    def synchronize(index: Any = None) -> None:
        _require_cuda()
        _settle(cuda.current if index is None else (index if isinstance(index, int) else _device(index).index or 0))

    @staticmethod
    def empty_cache() -> None:
        return None
