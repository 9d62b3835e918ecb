"""`gpuharness check health|audit|plan`: the suites ship inside the wheel (gpuharness/_checks) and run from an
installed package without the repository."""

from __future__ import annotations

import shutil
import subprocess
import sys
import venv
import zipfile

import pytest
from checkout import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    source = tmp_path_factory.mktemp("src")
    for name in ("src", "checks"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "--no-build-isolation",
                            "-w", str(out), "-q"], capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, built.stdout + built.stderr
    [path] = out.glob("gpuharness-*.whl")
    return path


def test_the_wheel_ships_every_check_suite(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    for suite in ("health", "audit", "plan"):
        source = sorted(p.name for p in (ROOT / "checks" / suite).glob("*.py"))
        shipped = sorted(n.rsplit("/", 1)[1] for n in names
                         if n.startswith(f"gpuharness/_checks/{suite}/") and n.endswith(".py"))
        assert source and shipped == source


def test_the_wheel_ships_its_data_files(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    data = [p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src" / "gpuharness").rglob("*.json")]
    assert data and [name for name in data if name not in names] == []


def test_the_wheel_is_pure_python(wheel):
    assert wheel.name.endswith("-py3-none-any.whl")
    assert not [n for n in zipfile.ZipFile(wheel).namelist() if n.endswith((".so", ".pyd", ".c"))]


@pytest.mark.slow
def test_check_runs_the_packaged_audit_suite_from_an_installed_wheel(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    # A venv of its own, as on a fresh machine: the wheel's dependencies come from the registry, never from
    # packages that happen to be installed globally here.
    venv.create(env_dir, system_site_packages=False, with_pip=True)
    python = env_dir / "bin" / "python"
    installed = subprocess.run([str(python), "-m", "pip", "install", "-q", str(wheel)],
                               capture_output=True, text=True, timeout=300)
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    registry = elsewhere / ".pi" / "gpu"
    gpuharness = env_dir / "bin" / "gpuharness"
    assert subprocess.run([str(gpuharness), "init", "--registry", str(registry)], cwd=elsewhere,
                          capture_output=True, timeout=120).returncode == 0
    ran = subprocess.run([str(gpuharness), "check", "audit", "--registry", str(registry), "-q", "-rA"],
                         cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert "_checks/audit" in ran.stdout or "_checks/audit" in ran.stderr, ran.stdout + ran.stderr
    assert str(ROOT) not in ran.stdout  # not the repository's copy
    assert ran.returncode == 0, ran.stdout + ran.stderr


def test_check_refuses_an_unknown_suite():
    ran = subprocess.run([sys.executable, "-m", "gpuharness", "check", "nightly"], capture_output=True, text=True,
                         timeout=60)
    assert ran.returncode == 2 and "invalid choice: 'nightly'" in ran.stderr


def test_check_uses_the_repository_suites_in_an_editable_install():
    ran = subprocess.run([sys.executable, "-m", "gpuharness", "check", "plan", "--collect-only", "-q"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert "test_plan.py" in ran.stdout, ran.stdout + ran.stderr
