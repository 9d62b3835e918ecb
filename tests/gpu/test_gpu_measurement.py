"""The GPU measurement program on this machine, which has no GPU: it fails cleanly, within its deadline, and says
why (no interpreter, no torch, torch without CUDA, a CUDA init that hangs, a process that cannot even run its own
watchdog). Run over the `local` transport: a real /bin/sh, a real interpreter, real `timeout`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from gpuharness.gpu.measurement import Measurement, build_script, parse, run
from gpuharness.remote.local import LocalRemote


def stand_in(tmp_path: Path, body: str) -> str:
    """An interpreter whose `import torch` finds `body`: this machine's python with a torch package beside it."""
    package = tmp_path / "site" / "torch"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    wrapper = tmp_path / "python"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def measure(interpreter: str | None, deadline_s: int) -> tuple[Measurement, float]:
    started = time.monotonic()
    _, measurement = run(LocalRemote(), interpreter, deadline_s=deadline_s)
    return measurement, time.monotonic() - started


def test_an_interpreter_without_torch_says_torch_is_not_importable():
    measurement, took = measure(sys.executable, deadline_s=20)
    assert measurement.status == "absent" and not measurement.devices
    assert "torch is not importable" in measurement.reason and "No module named 'torch'" in measurement.reason
    assert took < 20


def test_a_missing_interpreter_says_so_without_running_anything(tmp_path):
    measurement, _ = measure(str(tmp_path / "venv" / "bin" / "python"), deadline_s=20)
    assert measurement.status == "no_interpreter"
    assert "venv/bin/python" in measurement.reason
    assert measure(None, deadline_s=20)[0].status == "no_interpreter"


def test_torch_without_a_gpu_says_it_sees_none(tmp_path):
    interpreter = stand_in(tmp_path, "__version__ = '2.7.1+cpu'\nclass version:\n    cuda = None\n"
                           "class cuda:\n    is_available = staticmethod(lambda: False)\n"
                           "    device_count = staticmethod(lambda: 0)\n")
    measurement, _ = measure(interpreter, deadline_s=20)
    assert measurement.status == "no_cuda" and measurement.torch_version == "2.7.1+cpu"
    assert "sees no GPU" in measurement.reason


def test_a_cuda_init_that_hangs_is_cut_at_the_deadline_and_names_the_step(tmp_path):
    interpreter = stand_in(tmp_path, "import time\n__version__ = '2.7.1'\nclass version:\n    cuda = '12.8'\n"
                           "class cuda:\n    is_available = staticmethod(lambda: time.sleep(3600))\n")
    measurement, took = measure(interpreter, deadline_s=2)
    assert measurement.status == "deadline" and measurement.phase == "cuda init"
    assert "ran past its deadline of 2 s in step 'cuda init'" in measurement.reason
    assert took < 2 + 5


def test_a_process_that_cannot_run_its_watchdog_is_killed_by_timeout(tmp_path):
    # SIGSTOP freezes every thread, the watchdog included: only the shell's timeout(1) can end it
    interpreter = stand_in(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)\n")
    measurement, took = measure(interpreter, deadline_s=2)
    assert measurement.status == "deadline" and measurement.phase == "import torch"
    assert took < 2 + 3 + 5


def test_a_crash_names_the_step_and_the_last_error_line(tmp_path):
    interpreter = stand_in(tmp_path, "raise RuntimeError('CUDA driver initialization failed')\n")
    measurement, _ = measure(interpreter, deadline_s=20)
    assert measurement.status == "absent"  # an import that raises is torch that cannot be used
    assert "RuntimeError: CUDA driver initialization failed" in measurement.reason


def test_a_program_that_dies_mid_way_is_an_error_with_its_last_line():
    stdout = ('@@gpuharness measure {"kind": "phase", "phase": "matmul"}\n@@gpuharness measure-exit 1\n')
    measurement = parse(stdout, "Traceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory "
                        "access was encountered\n", 0)
    assert measurement.status == "error"
    assert measurement.reason.startswith("the measurement stopped in step 'matmul' (exit 1): RuntimeError: CUDA")


def test_parameters_travel_as_quoted_variables_never_as_code():
    script = build_script("/opt/my venv/bin/python'; rm -rf /; '", deadline_s=30, precision="bf16")
    assert "GH_PY='/opt/my venv/bin/python'\"'\"'; rm -rf /; '\"'\"''" in script
    assert '"$GH_PY" -c "$GH_PROGRAM"' in script


