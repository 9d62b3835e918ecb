"""The plugin's options: one place, with defaults from the environment where documented."""

import pytest


def test_gpu_mode_defaults_to_offline(pytester, monkeypatch):
    monkeypatch.delenv("GPUHARNESS_GPU_MODE", raising=False)
    pytester.makepyfile("def test_mode(gpu_mode):\n    assert gpu_mode == 'offline'\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_gpu_mode_default_comes_from_the_environment(pytester, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_GPU_MODE", "live")
    pytester.makepyfile("def test_mode(gpu_mode):\n    assert gpu_mode == 'live'\n")
    pytester.runpytest_subprocess().assert_outcomes(passed=1)


def test_command_line_gpu_mode_beats_the_environment(pytester, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_GPU_MODE", "live")
    pytester.makepyfile("def test_mode(gpu_mode):\n    assert gpu_mode == 'record'\n")
    pytester.runpytest_subprocess("--gpu-mode", "record").assert_outcomes(passed=1)


def test_bad_gpu_mode_in_the_environment_is_a_usage_error(pytester, monkeypatch):
    monkeypatch.setenv("GPUHARNESS_GPU_MODE", "sometimes")
    pytester.makepyfile("def test_never():\n    pass\n")
    result = pytester.runpytest_subprocess()
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*GPUHARNESS_GPU_MODE='sometimes': expected one of offline, live, record*"])
