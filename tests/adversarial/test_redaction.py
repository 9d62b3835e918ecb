"""One redactor, at every sink: a provider key that a host, a provider or a file writes (plain, as `Bearer`/`Basic`,
in base64 at any offset of a longer blob, URL-safe, percent-encoded or JSON-\\u-escaped in any subset of its
characters, among bytes that are not UTF-8, gzip'd) is in no byte that the harness writes: the health evidence in
deployments.json, the journal, the HTML and JUnit reports, the terminal, a recorded cassette, an audit finding.
The audit's secret rule finds those same forms in the files it reads.

The forms looked for are computed here, independently of gpuharness.core.secrets."""

from __future__ import annotations

import ast
import base64
import contextlib
import gzip
import html
import io
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from secrets import token_hex
from typing import Any

import httpx
import pytest
import yaml
from checkout import ROOT
from health_world import HealthWorld
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import build_deployment, build_job
from gpuharness.audit import rules
from gpuharness.audit.run import run_audit
from gpuharness.cli import main
from gpuharness.core import secrets
from gpuharness.core.clock import parse_ts
from gpuharness.core.lifecycle import transition
from gpuharness.core.registry import Registry
from gpuharness.providers import cassette
from gpuharness.sim.host import HostSpec
from gpuharness.sim.server import Simulator

SRC = ROOT / "src" / "gpuharness"
ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
URLSAFE = ALNUM + "-_"
NOW = parse_ts("2026-11-02T12:00:00Z")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB; "
ONE_SINK = settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

#: keys as providers issue them: RunPod's rpa_..., Vast's 64 hex digits, and random URL-safe tokens
keys = st.one_of(
    st.text(ALNUM, min_size=24, max_size=40).map(lambda s: "rpa_" + s),
    st.text("0123456789abcdef", min_size=64, max_size=64),
    st.text(URLSAFE, min_size=20, max_size=48),  # providers.factory refuses shorter keys
).filter(lambda key: len(set(key)) >= 8)


def b64(data: bytes | str, urlsafe: bool = False) -> str:
    raw = data.encode() if isinstance(data, str) else data
    return (base64.urlsafe_b64encode(raw) if urlsafe else base64.b64encode(raw)).decode()


def base64_cores(key: str) -> list[bytes]:
    """The base64 characters that the key's bytes alone decide, at each offset (mod 3) inside a longer blob."""
    cores = []
    for offset in range(3):
        encoded = base64.b64encode(bytes(offset) + key.encode())
        core = encoded[-(-8 * offset // 6):8 * (offset + len(key)) // 6]
        cores += [core, core.translate(bytes.maketrans(b"+/", b"-_"))]
    return cores


def canonical_forms(key: str) -> list[bytes]:
    """Every encoding of the whole key that must be in no written byte."""
    raw = key.encode()
    return [raw, "".join(f"%{b:02X}" for b in raw).encode(), "".join(f"%{b:02x}" for b in raw).encode(),
            "".join(f"\\u{ord(c):04x}" for c in key).encode(), "".join(f"\\u{ord(c):04X}" for c in key).encode(),
            key.encode("utf-16-le"), *base64_cores(key)]


@st.composite
def hostile_forms(draw: st.DrawFn, key: str) -> dict[str, str]:
    """The key as a hostile party writes it, by name of the encoding."""
    user = draw(st.text(ALNUM, min_size=1, max_size=9))
    before, after = draw(st.binary(max_size=5)), draw(st.binary(max_size=5))
    escaped = draw(st.lists(st.booleans(), min_size=len(key), max_size=len(key)))
    escaped[draw(st.integers(0, len(key) - 1))] = True  # at least one character escaped
    upper = draw(st.booleans())
    hexes = "{:02X}" if upper else "{:02x}"
    return {
        "plain": key,
        "bearer": f"Bearer {key}",
        "basic": "Basic " + b64(f"{user}:{key}"),
        "base64 in a blob": b64(before + key.encode() + after),
        "base64 of a bearer header": b64(f"Bearer {key}"),
        "urlsafe base64, no padding": b64(key, urlsafe=True).rstrip("="),
        "percent-encoded": "".join("%" + hexes.format(ord(c)) if e else c for c, e in zip(key, escaped, strict=True)),
        "json \\u escapes": "".join(("\\u" + ("{:04X}" if upper else "{:04x}").format(ord(c))) if e else c
                                    for c, e in zip(key, escaped, strict=True)),
    }


def views(data: bytes) -> list[bytes]:
    """data as written, and as a reader decodes it (HTML entities, JSON's `\\/`, a JSON text in a JSON string)."""
    text = data.decode("utf-8", "replace")
    return [data, data.replace(b"\\/", b"/"), data.replace(b"\\\\", b"\\"), html.unescape(text).encode()]


def leaks(data: bytes, key: str, forms: dict[str, str] | None = None) -> list[str]:
    """Which forms of key are in data."""
    wanted = {f"canonical {n}": form for n, form in enumerate(canonical_forms(key))}
    wanted.update({name: form.encode() for name, form in (forms or {}).items()})
    return sorted({name for view in views(data) for name, form in wanted.items() if form in view})


def written(*roots: Path, skip: tuple[Path, ...] = ()) -> Iterator[tuple[Path, bytes]]:
    for root in roots:
        for path in sorted(root.rglob("*")) if root.is_dir() else [root]:
            if path.is_file() and not any(path.is_relative_to(s) for s in skip):
                yield path, path.read_bytes()


def assert_nowhere(key: str, forms: dict[str, str], files: Iterator[tuple[Path, bytes]], *texts: str) -> None:
    found = {str(path): leaks(data, key, forms) for path, data in files}
    found.update({f"text {n}": leaks(text.encode(), key, forms) for n, text in enumerate(texts)})
    assert {where: what for where, what in found.items() if what} == {}


# the redactor itself


@settings(max_examples=200, deadline=None)
@given(st.data(), keys)
def test_the_redactor_leaves_no_form_of_a_configured_key(data: st.DataObject, key: str) -> None:
    forms = data.draw(hostile_forms(key))
    junk = data.draw(st.binary(min_size=1, max_size=6).filter(lambda b: b.decode("utf-8", "ignore") != b.decode(
        "latin-1")))
    for name, form in forms.items():
        text = f"line: {form} | {json.dumps({'at': form})}"
        assert leaks(secrets.redact(text, [key]).encode(), key, forms) == [], name
        raw = junk + form.encode() + b"\x80" + json.dumps(form).encode() + junk
        assert leaks(secrets.redact(raw, [key]), key, forms) == [], name


# health evidence, the journal, the HTML and JUnit reports, the terminal of a pytest run


def health_run(pytester: pytest.Pytester, key: str, line: str, root: Path) -> tuple[Any, HealthWorld, Path]:
    world = HealthWorld(root / "world")
    try:
        world.add("dep_leak", replace(HostSpec(), log_lines=("Starting server", line)))
        checks = world.install_checks(pytester.path)
        reports = root / "reports"
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("VAST_API_KEY", key)
            result = pytester.runpytest_inprocess(
                str(checks), "--registry", str(world.registry.root), "--gpu-mode", "live", "-p", "no:cacheprovider",
                "-rA", "-vv", f"--junitxml={reports / 'junit.xml'}", f"--html={reports / 'report.html'}",
                "--self-contained-html")
    finally:
        world.close()
    return result, world, reports


def assert_health_run_leaks_nothing(pytester: pytest.Pytester, key: str, forms: dict[str, str], line: str) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        result, world, reports = health_run(pytester, key, line, root)
        deployment = world.deployment("dep_leak")
        assert deployment["health"]["status"] == "failed" and deployment["health"]["cause"] == "cuda_oom", deployment
        assert (reports / "junit.xml").is_file() and (reports / "report.html").is_file()
        assert_nowhere(key, forms, written(world.registry.root, reports), *result.outlines, *result.errlines)


@ONE_SINK
@given(st.data(), keys)
def test_a_failing_health_run_writes_no_form_of_the_key_its_host_logs(pytester, data: st.DataObject, key: str):
    forms = data.draw(hostile_forms(key))
    order = data.draw(st.permutations(list(forms.values())))
    assert_health_run_leaks_nothing(pytester, key, forms, OOM + " ".join(order))


def test_the_issues_example_a_key_in_a_failing_hosts_log_line(pytester):
    key = "rpa_" + token_hex(14)
    assert_health_run_leaks_nothing(pytester, key, {"plain": key}, OOM + f"while loading with api key {key}")


# the journal and the deployment's record (core.lifecycle)


@settings(max_examples=50, deadline=None)
@given(st.data(), keys)
def test_a_transition_journals_no_form_of_the_key(data: st.DataObject, key: str) -> None:
    forms = data.draw(hostile_forms(key))
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        patch.setenv("VAST_API_KEY", key)
        registry = Registry(Path(directory) / "registry")
        registry.init()
        with registry.update("providers.json") as document:
            document["providers"].append({"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"})
        with registry.update("deployments.json") as document:
            document["deployments"].append(build_deployment("dep_a", "running", owner="ana", reason="renders"))
        said = " ".join(forms.values())
        transition(registry, "dep_a", "error", note=f"host said: {said}", marker={"said": said},
                   error=f"job failed: {said}")
        assert_nowhere(key, forms, written(registry.root))


# cassettes: record mode against the simulator, and against a hostile server (bodies in any encoding, headers)


@ONE_SINK
@given(st.data(), keys)
def test_recording_the_inventory_writes_no_form_of_the_key_a_provider_answers(data: st.DataObject, key: str):
    forms = data.draw(hostile_forms(key))
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch, \
            Simulator(ready_delay_s=0.0) as sim:
        patch.setenv("VAST_API_KEY", key)
        registry = Registry(Path(directory) / "registry")
        registry.init()
        with registry.update("providers.json") as document:
            document["providers"] = [{"name": kind, "kind": kind, "credential_env": "VAST_API_KEY",
                                      "api_base": sim.url(kind)} for kind in ("vast", "runpod")]
        for n, form in enumerate(forms.values()):  # instance names the provider answers with: orphans, printed
            sim.create_instances(("vast", "runpod")[n % 2], 1, name_prefix=f"gh-{form}-")
        tape = Path(directory) / "cassettes" / "inventory.yaml"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["status", "--refresh", "--gpu-mode", "record", "--cassette", str(tape), "--registry",
                         str(registry.root)])
        assert code in (0, 1), err.getvalue()  # 1: it reports the instances as orphans
        assert "REDACTED" in tape.read_text()
        assert_nowhere(key, forms, written(tape.parent, registry.root), out.getvalue(), err.getvalue(),
                       *cassette_texts(tape))


@ONE_SINK
@given(st.data(), keys)
def test_recording_the_bill_writes_no_form_of_the_key(data: st.DataObject, key: str):
    """`bill --gpu-mode record`: the bill's cassette (the audit's outside anchor) and what bill prints."""
    forms = data.draw(hostile_forms(key))
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch, \
            Simulator(ready_delay_s=0.0) as sim:
        patch.setenv("VAST_API_KEY", key)
        registry = Registry(Path(directory) / "registry")
        registry.init()
        with registry.update("providers.json") as document:
            document["providers"] = [{"name": kind, "kind": kind, "credential_env": "VAST_API_KEY",
                                      "api_base": sim.url(kind)} for kind in ("vast", "runpod")]
        for kind in ("vast", "runpod"):
            sim.create_instances(kind, 1, name_prefix=f"gh-{forms['plain']}-")
        tape = Path(directory) / "cassettes" / "bill.yaml"
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["bill", "--gpu-mode", "record", "--cassette", str(tape), "--registry", str(registry.root)])
        assert code in (0, 1), err.getvalue()  # 1: the instances are in no deployment
        assert "REDACTED" in tape.read_text() and "billing/pods" in tape.read_text()
        assert_nowhere(key, forms, written(tape.parent, registry.root), out.getvalue(), err.getvalue(),
                       *cassette_texts(tape))


def cassette_texts(path: Path) -> list[str]:
    """Every string and byte string of a cassette as YAML decodes it (a body that is not UTF-8 is !!binary)."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, bytes):
            found.append(value.decode("latin-1"))
        elif isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict):
            for k, v in value.items():
                walk(k)
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(yaml.safe_load(path.read_text()))
    return found


class HostileProvider(BaseHTTPRequestHandler):
    """Answers with the key in a gzip'd body, in a body that is not UTF-8, and in headers."""

    key = ""
    forms: dict[str, str] = {}

    def do_GET(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        said = " ".join(self.forms.values())
        if self.path.startswith("/gzip"):
            body, extra = gzip.compress(json.dumps({"note": said}).encode()), {"Content-Encoding": "gzip"}
        elif self.path.startswith("/binary"):
            body, extra = b"\xff\xfe\x00" + said.encode() + b"\x80\x81" + self.key.encode("utf-16-le"), {}
        else:
            body, extra = b"ok", {"X-Echo": b64(f"Bearer {self.key}"), "X-Said": said,
                                  "Set-Cookie": f"session={self.key}", "WWW-Authenticate": f"Bearer {self.key}"}
        self.send_response(200)
        for name, value in {"Content-Length": str(len(body)), **extra}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextlib.contextmanager
def hostile_provider(key: str, forms: dict[str, str]) -> Iterator[str]:
    handler = type("Handler", (HostileProvider,), {"key": key, "forms": forms})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def record_hostile_exchanges(key: str, forms: dict[str, str], tape: Path) -> None:
    with hostile_provider(key, forms) as base, pytest.MonkeyPatch.context() as patch:
        patch.setenv(secrets.TEST_SECRET_ENV, key)
        with cassette.use(tape, cassette.Mode.RECORD), httpx.Client(base_url=base) as client:
            said = forms["percent-encoded"]
            client.get(f"/gzip?q={said}&token={key}", headers={
                "Authorization": forms["basic"], "X-Forwarded-Auth": b64(f"Bearer {key}")})
            client.get("/binary", headers={"Accept": "*/*"})
            client.post("/headers", content=b"\xff\x00" + forms["base64 in a blob"].encode() + b"\xfe" + key.encode())


@settings(max_examples=20, deadline=None)
@given(st.data(), keys)
def test_recording_a_hostile_provider_writes_no_form_of_the_key(data: st.DataObject, key: str) -> None:
    forms = data.draw(hostile_forms(key))
    with tempfile.TemporaryDirectory() as directory:
        tape = Path(directory) / "hostile.yaml"
        record_hostile_exchanges(key, forms, tape)
        assert_nowhere(key, forms, written(tape), *cassette_texts(tape))


@pytest.mark.parametrize("example", ["a body that is not UTF-8", "a header holding base64 of Bearer <key>"])
def test_the_issues_examples_a_binary_body_and_a_base64_header(tmp_path, example):
    key = "0123456789abcdef" * 4
    tape = tmp_path / "hostile.yaml"
    record_hostile_exchanges(key, {"percent-encoded": key[:10] + "%61" + key[11:], "basic": f"Basic {b64(key)}",
                                   "base64 in a blob": b64(key)}, tape)
    texts = cassette_texts(tape)
    if example == "a body that is not UTF-8":
        assert any(text.startswith("\xff\xfe\x00") for text in texts), "the binary body was recorded"
    else:
        assert any(text.lower() == "x-echo" for text in texts), "the header was recorded"
    assert_nowhere(key, {}, written(tape), *texts)


# the terminal of a command, and the audit's findings


@settings(max_examples=20, deadline=None)
@given(st.data(), keys)
def test_diagnose_prints_no_form_of_the_key_a_log_holds(data: st.DataObject, key: str) -> None:
    forms = data.draw(hostile_forms(key))
    with tempfile.TemporaryDirectory() as directory, pytest.MonkeyPatch.context() as patch:
        root = Path(directory) / "registry"
        Registry(root).init()
        (root / "providers.json").write_text(json.dumps({"schema_version": 1, "providers": [
            {"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"}]}))
        patch.setenv("VAST_API_KEY", key)
        patch.setenv("GPUHARNESS_REGISTRY", str(root))
        log = Path(directory) / "comfy.log"
        log.write_text("".join(f"{OOM}{form}\n" for form in forms.values()))
        shown = []
        for extra in ([], ["--json"]):
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                main(["diagnose", str(log), *extra])
            shown += [out.getvalue(), err.getvalue()]
        assert "out of memory" in shown[0].lower()
        assert_nowhere(key, forms, iter(()), *shown)


def test_diagnose_in_a_process_of_its_own_prints_no_key(tmp_path):
    key = "rpa_" + token_hex(14)
    root = tmp_path / "registry"
    Registry(root).init()
    (root / "providers.json").write_text(json.dumps({"schema_version": 1, "providers": [
        {"name": "runpod", "kind": "runpod", "credential_env": "RUNPOD_API_KEY"}]}))
    log = tmp_path / "comfy.log"
    log.write_text(f"{OOM}Authorization: Basic {b64('me:' + key)} for {key}\n")
    env = {**os.environ, "RUNPOD_API_KEY": key, "GPUHARNESS_REGISTRY": str(root)}
    done = subprocess.run([sys.executable, "-m", "gpuharness", "diagnose", str(log)], env=env, capture_output=True,
                          text=True, timeout=120)
    assert "out of memory" in done.stdout.lower(), done.stdout + done.stderr
    assert_nowhere(key, {}, iter(()), done.stdout, done.stderr)


def audited(directory: Path, key: str, ledger: str) -> Any:
    root = directory / "registry"
    Registry(root).init()
    (root / "providers.json").write_text(json.dumps({"schema_version": 1, "providers": [
        {"name": "vast", "kind": "vast", "credential_env": "VAST_API_KEY"}]}))
    (root / "deployments.json").write_text(json.dumps({"schema_version": 1, "deployments": [
        build_deployment("dep_a", owner="ana", reason="renders")]}))
    (root / "jobs.jsonl").write_text(ledger)  # by hand, as a person or an agent may
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("VAST_API_KEY", key)
        return run_audit(root, NOW, use_checkpoint=False)


@settings(max_examples=30, deadline=None)
@given(st.data(), keys)
def test_the_audit_finds_every_form_of_a_key_and_its_findings_show_none(data: st.DataObject, key: str) -> None:
    forms = data.draw(hostile_forms(key))
    lines = [build_job(f"J-{n:06d}", "failed", error=f"host said {form}") for n, form in enumerate(forms.values(), 1)]
    lines.append(build_job("J-000099", deployment_id=f"dep-{forms['plain']}"))  # a finding quotes this id
    with tempfile.TemporaryDirectory() as directory:
        run = audited(Path(directory), key, "".join(json.dumps(line) + "\n" for line in lines))
    found = [f for f in run.findings[rules.SECRETS_LEDGER] if "VAST_API_KEY" in f.message]
    lines_found = sorted({int(f.where.rsplit(":", 1)[1]) for f in found})
    assert lines_found == list(range(1, len(forms) + 2)), ([f.line() for f in found], list(forms))
    every = [f.line() for findings in run.findings.values() for f in findings]
    assert any("dep-" in line for line in every), "the unknown deployment's id is quoted"
    assert_nowhere(key, forms, iter(()), *every)


def test_the_issues_example_the_audit_finds_a_key_written_with_json_escapes(tmp_path):
    key = "rpa_" + token_hex(14)
    escaped = "".join(f"\\u{ord(c):04x}" for c in key[:8]) + key[8:]  # JSON reads it back as the key itself
    line = json.dumps(build_job("J-000001", "failed", error="x")).replace('"x"', f'"{escaped}"')
    assert json.loads(line)["error"] == key
    run = audited(tmp_path, key, line + "\n")
    assert [f.where for f in run.findings[rules.SECRETS_LEDGER]] == ["jobs.jsonl:1"], run.findings
    assert_nowhere(key, {}, iter(()), *(f.line() for findings in run.findings.values() for f in findings))


# every sink is known


#: The modules of src/gpuharness that write (print, write_text, write_bytes, .write, os.write, json.dump,
#: yaml.dump), how many such calls each has, and why what it writes cannot carry a secret past the redactor. A new
#: sink, or a new write in one of these, fails here until it writes through core.secrets (or says why it need not).
SINKS: dict[str, tuple[int, str]] = {
    "core/terminal.py": (1, "show(): shown() is redact, then escape"),
    "core/statefile.py": (1, "atomic_write_bytes redacts: every state file, the audit's checkpoint"),
    "core/jsonl.py": (3, "append_record redacts the line; the torn fragment is redacted; a newline"),
    "core/claims.py": (1, "a pid"),
    "core/base_dir.py": (1, "Folder.replace writes what its callers give: the transcript (redacted in "
                            "probe/transcripts.py) and the server catalog (every string scrubbed by the "
                            "transcripts' redactor when recorded; the run's own copy is a cache in pytest's "
                            "temporary directory)"),
    "probe/session.py": (1, "the run's probe cache in pytest's temporary directory, read back by its workers"),
    "probe/probing.py": (1, "transcripts.write, redacted there"),
    "pytest_plugin/health_target.py": (2, "shown(): redacted and escaped (the captured output)"),
    "audit/ledger_pass.py": (1, "the pass's job states (msgspec), read back by the audit"),
    "audit/run.py": (1, "the audit's checkpoint (AuditRun.attest), through statefile.atomic_write_bytes"),
    "audit/ledger_split.py": (1, "the forked child's report, through a pipe to its parent"),
    "audit/ledger_columns.py": (1, "the columnar pass's job states (msgspec), read back by the audit"),
    "remote/ssh.py": (1, "an artifact's bytes, copied as they are"),
    "remote/local.py": (2, "an artifact's bytes; a command's stdin"),
    "remote/hostkeys.py": (1, "a public host key"),
    "remote/deadline.py": (1, "the request to the provider"),
    "cli/sim_cmds.py": (1, "`ready <url>` to the parent"),
    "cli/status_view.py": (4, "rich renders the table and its shown() lines into a string, which cli.emit shows: "
                              "redacted and escaped"),
    "demo/tour.py": (2, "a command's output, redacted"),
    "demo/simulated_estate.py": (1, "a command's output, redacted"),
    "demo/steps.py": (1, "rich prints a shown() line (redacted and escaped) with its markup escaped"),
    "pytest_plugin/steps.py": (1, "a newline before a step header"),
}
WRITERS = frozenset({"print", "write_text", "write_bytes", "write", "dump", "safe_dump"})


def _writes(path: Path) -> int:
    count = 0
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            count += name in WRITERS
    return count


def test_every_sink_is_known_and_writes_through_the_redactor():
    found = {str(p.relative_to(SRC)): _writes(p) for p in sorted(SRC.rglob("*.py"))
             if not p.relative_to(SRC).parts[0] == "sim"}  # the simulator is the other party
    assert {k: v for k, v in found.items() if v} == {k: count for k, (count, _) in SINKS.items()}


def test_the_names_of_secrets_live_only_in_core_secrets():
    names = {'"api_key"', '"authorization"', '"x-api-key"', '"set-cookie"', '"jupyter_token"', '"token"',
             "api_key|token"}
    holders = []
    for path in sorted(SRC.rglob("*.py")):
        text = path.read_text("utf-8")
        lists = [line for line in text.splitlines() if sum(name in line.lower() for name in names) >= 2]
        if lists and path.name != "secrets.py":
            holders.append(f"{path.relative_to(SRC)}: {lists[0].strip()}")
    assert holders == []


def test_a_written_report_of_this_suite_is_clean_too(tmp_path):
    # the report hooks run for any suite, not only checks/: a failing assertion quoting the key is redacted
    key = "".join(random.Random(7).choice(ALNUM) for _ in range(32))
    test = tmp_path / "test_quotes.py"
    test.write_text(f"def test_quotes():\n    print('said {b64('Bearer ' + key)}')\n    assert '{key}' == ''\n")
    env = {**os.environ, secrets.TEST_SECRET_ENV: key}
    done = subprocess.run([sys.executable, "-m", "pytest", str(test), "-p", "no:cacheprovider", "-rA",
                           f"--junitxml={tmp_path / 'r.xml'}", f"--html={tmp_path / 'r.html'}",
                           "--self-contained-html"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert "1 failed" in done.stdout, done.stdout[-2000:]
    assert_nowhere(key, {}, written(tmp_path / "r.xml", tmp_path / "r.html"), done.stdout, done.stderr)
