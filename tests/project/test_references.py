"""What the source cites exists: a module of ours it names is in the tree, and a document it cites ships with the
repository or is a public address (never a file on one engineer's machine)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from checkout import ROOT

SRC = ROOT / "src" / "gpuharness"
PACKAGES = sorted(p.name for p in SRC.iterdir() if (p / "__init__.py").exists())
#: `providers.transport.retry_wait`, `core/runtimes.py`, `gpuharness.sim.host`: a path that starts at one of our
#: packages (the step after it must be one of its modules, subpackages or names)
CITED = re.compile(rf"(?<![\w./-])(?:gpuharness[./])?({'|'.join(PACKAGES)})[./](\w+)(?![\w*<-])")
#: what follows a package's name when a sentence names a file, not a module (providers.json, jobs-*.jsonl)
NOT_MODULES = {"json", "jsonl", "md", "yaml", "yml", "txt", "html"}
#: prose pointing at a module by its bare name (see a_module.function)
SEE = re.compile(r"\bsee ([a-z_]+)\.[a-z_]+")
#: a file on one machine, not in the repository nor at a public address
OUTSIDE = re.compile(r"shared/reference/|/work/")
OURS = {p.stem for p in SRC.rglob("*.py")} | {p.name for p in SRC.rglob("*") if p.is_dir()} | {"gpuharness"}
DOCUMENTS = {"deployments", "transitions", "providers", "machines", "models", "workflows", "connections", "policy",
             "jobs"}
FILES = [path for path in (*sorted(SRC.rglob("*.py")), *sorted((ROOT / "tests").rglob("*.py")),
                            *sorted((ROOT / "checks").rglob("*.py"))) if path != Path(__file__).resolve()]


def _exists(package: str, name: str) -> bool:
    base = SRC / package
    if name in NOT_MODULES or (base / f"{name}.py").is_file() or (base / name).is_dir():
        return True
    # a name the package defines, or re-exports (listed in its __all__)
    return re.search(rf"^(?:class |def )?{name}\b|\"{name}\"", (base / "__init__.py").read_text("utf-8"),
                     re.MULTILINE) is not None


def _prose(text: str) -> list[tuple[int, str]]:
    """(line number, text) of the comments and docstrings, where references are cited."""
    found: list[tuple[int, str]] = []
    in_doc = False
    for number, line in enumerate(text.splitlines(), 1):
        quotes = line.count('"""')
        if in_doc or quotes:
            found.append((number, line.strip()))
            if quotes == 1:
                in_doc = not in_doc
        elif "#" in line:
            found.append((number, line[line.index("#"):]))
    return found


def stale_references(text: str) -> list[str]:
    """Each citation in the comments and docstrings of a source text that points nowhere, with its line."""
    wrong = []
    for number, line in _prose(text):
        if OUTSIDE.search(line):
            wrong.append(f"line {number} cites a file outside the repository: {line}")
        wrong += [f"line {number} cites {package}.{name}, which does not exist"
                  for package, name in CITED.findall(line) if not _exists(package, name)]
        wrong += [f"line {number} cites module {module}, which does not exist"
                  for module in SEE.findall(line) if module not in OURS and module not in DOCUMENTS]
    return wrong


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_cited_module_exists_and_every_cited_document_ships(path):
    assert stale_references(path.read_text("utf-8")) == [], path.relative_to(ROOT)


def test_the_reference_check_catches_a_module_that_moved_and_a_private_document():
    wrong = stale_references('"""Wire shapes of shared/' + 'reference/providers.md §4; see core/comfy_gone.py."""\n'
                             "x = 1  # the same wait as reads, see " + "http_client.retry_wait\n"
                             "# see providers.transport.retry_wait and gpuharness.sim.host, as remote/http.py\n")
    assert [w.split(" cites ")[1][:24] for w in wrong] == [
        "a file outside the repos", "core.comfy_gone, which d", "module http_client, whic"], wrong
