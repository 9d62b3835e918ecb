"""The reference in docs/ builds with MkDocs Material, strictly: a broken link or a page missing from the
navigation fails here, as it fails in .ci/run."""
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from checkout import ROOT


def test_the_docs_build_strictly(tmp_path: Path) -> None:
    mkdocs = shutil.which("mkdocs")
    if mkdocs is None:
        if os.environ.get("GPUHARNESS_REQUIRE_MKDOCS") == "1":
            pytest.fail("mkdocs is required (GPUHARNESS_REQUIRE_MKDOCS=1) but not installed: pip install -e '.[dev]'")
        pytest.skip("mkdocs is not installed (pip install -e '.[dev]')")
    done = subprocess.run([mkdocs, "build", "--strict", "--site-dir", str(tmp_path / "site")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()


def test_the_readme_is_a_start_page() -> None:
    lines = (ROOT / "README.md").read_text("utf-8").splitlines()
    assert len(lines) <= 300, f"README.md has {len(lines)} lines; move reference to docs/"
