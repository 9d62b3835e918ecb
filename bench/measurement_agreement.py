"""The GPU measurement against a careful one, in the same run (issue 21): the project's program
(gpuharness.gpu.measurement) and the careful measurement of the real H200 run (tests/careful_measurement.py: a mean
of 10 after 3 warm-ups, each run timed alone with CUDA events, same sizes), both by the same interpreter on GPU 0.
Prints each figure, the careful one and their ratio (the bar: within 5%), and the cold loop's ratio beside it.

Without --python it runs on the simulator's torch stand-in configured as --gpu (no GPU needed); on a GPU box, name
the interpreter whose torch sees the GPU:

    python bench/measurement_agreement.py                                  # the stand-in H200
    python bench/measurement_agreement.py --python /opt/venv/bin/python3   # a real GPU
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from careful_measurement import FIGURES, careful  # noqa: E402

from gpuharness.gpu import classes  # noqa: E402
from gpuharness.gpu.measurement import run  # noqa: E402
from gpuharness.remote.local import LocalRemote  # noqa: E402
from gpuharness.sim import gpu_figures  # noqa: E402
from gpuharness.sim.host import python_environment  # noqa: E402


def stand_in(gpu: str, root: Path) -> Path:
    known = classes.by_name(gpu)
    files = gpu_figures.torch_files(gpu=gpu, devices=1, total_mib=known.memory_mib if known else 24564, used_mib=1,
                                    smoke_error=3e-5, sim=gpu_figures.figures(gpu), busy_dir=root)
    return python_environment(root / "venv", files)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python", help="an interpreter whose torch sees a GPU (default: the stand-in)")
    parser.add_argument("--gpu", default="NVIDIA H200", help="the stand-in's card (an nvidia-smi name)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gh-agreement-") as scratch:
        python = Path(args.python) if args.python else stand_in(args.gpu, Path(scratch))
        truth = careful(python)
        _, measurement = run(LocalRemote(), str(python), deadline_s=120)
    if not measurement.measured:
        print(f"not measured: {measurement.reason}", file=sys.stderr)
        return 1
    device = measurement.devices[0]
    where = args.python or f"the torch stand-in as {args.gpu}"
    print(f"GPU 0 ({device.name}) by {where}; the program took {device.gpu_s} GPU seconds")
    print(f"{'figure':<18}{'program':>10}{'careful':>10}{'ratio':>8}  timing")
    for figure in FIGURES:
        value = getattr(device, figure)
        ratio = f"{value / truth[figure]:.3f}" if value else "-"
        print(f"{figure:<18}{value or 0:>10.1f}{truth[figure]:>10.1f}{ratio:>8}  {device.timing.get(figure, '-')}")
    loop = truth["matmul_loop_tflops"]
    print(f"{'cold loop matmul':<18}{loop:>10.1f}{truth['matmul_tflops']:>10.1f}"
          f"{loop / truth['matmul_tflops']:>8.3f}  320 matmuls timed as a whole (the first program's way)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
