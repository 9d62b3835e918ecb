"""One HTTP seam: every HTTP client to the outside is `remote.http.PhaseHttp` (it carries the phase deadline and
bounds each answer). No other module builds an httpx client or calls httpx's one-shot functions, except the two
named here, which never reach the outside."""

from __future__ import annotations

import ast
from pathlib import Path

from checkout import ROOT

SRC = ROOT / "src" / "gpuharness"
SEAM = "remote/http.py"
#: modules that speak HTTP without the seam, and why that is no call to the outside
BESIDE_THE_SEAM = {
    "plans/replay.py": "replays a cassette in mode none (base URL nowhere): vcrpy answers, never the network",
    "cli/sim_cmds.py": "`sim stop` and `sim serve` ask the local simulator this command line started",
}
CLIENTS = frozenset({"Client", "AsyncClient", "get", "post", "put", "patch", "delete", "head", "options", "request",
                     "stream"})


def clients_built(path: Path) -> list[str]:
    """`line: httpx.<name>` for every httpx client built, or one-shot request made, in the file."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in CLIENTS \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "httpx":
            found.append(f"{node.lineno}: httpx.{node.func.attr}")
    return found


def test_every_http_client_to_the_outside_is_the_one_seam():
    wrong = {str(path.relative_to(SRC)): clients_built(path) for path in sorted(SRC.rglob("*.py"))
             if str(path.relative_to(SRC)) not in (SEAM, *BESIDE_THE_SEAM) and clients_built(path)}
    assert wrong == {}, (f"HTTP outside the one seam: {wrong}; speak through gpuharness.remote.http.PhaseHttp "
                         "(a provider through providers.transport.ProviderHttp, which uses it)")


def test_the_modules_beside_the_seam_still_need_to_be_there():
    stale = [name for name in BESIDE_THE_SEAM if not (SRC / name).is_file() or not clients_built(SRC / name)]
    assert stale == [], f"{stale}: no longer speak HTTP; take them off BESIDE_THE_SEAM"


def test_the_check_finds_a_client_built_beside_the_seam(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import httpx\nclient = httpx.Client(base_url='https://api.example.test')\n"
                   "answer = httpx.get('https://api.example.test/x')\nresponse = client.get('/y')\n")
    assert clients_built(bad) == ["2: httpx.Client", "3: httpx.get"]
