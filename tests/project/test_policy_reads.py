"""policy.json is read through the typed Policy of core/policy.py only: no module reads one of its keys by string
(`policy.get("daily_usd")`, `doc["retry"]`), so every default lives in one place."""

from __future__ import annotations

import ast
import json
from pathlib import Path

from checkout import ROOT

SRC = ROOT / "src" / "gpuharness"
OWNER = SRC / "core" / "policy.py"
#: policy.json's own keys (its schema's properties), less the generic ones other documents share
GENERIC = {"schema_version", "reason"}


def policy_keys() -> set[str]:
    schema = json.loads((SRC / "core" / "schemas" / "policy.schema.json").read_text("utf-8"))
    keys = set(schema["properties"]) - GENERIC
    for section in ("retry", "cost_tolerance", "health_timeouts", "performance_floor"):
        keys |= set(schema["properties"][section].get("properties", {}))
    return keys


def string_key_reads(path: Path, keys: set[str], root: Path = SRC) -> list[str]:
    """`x.get("key", ...)` and `x["key"]` (read, not written) with a policy key, as `file:line key`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args and isinstance(node.args[0], ast.Constant):
            key = node.args[0].value
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) \
                and isinstance(node.slice, ast.Constant):
            key = node.slice.value
        if isinstance(key, str) and key in keys:
            found.append(f"{path.relative_to(root)}:{node.lineno} {key}")
    return found


def test_no_module_reads_the_policy_by_string_key() -> None:
    keys = policy_keys()
    reads = [hit for root in (SRC, ROOT / "checks") for path in sorted(root.rglob("*.py")) if path != OWNER
             for hit in string_key_reads(path, keys, ROOT)]
    assert reads == [], "read the policy through core.policy.Policy's typed fields: " + "; ".join(reads)


def test_the_counter_sees_a_string_key_read(tmp_path: Path) -> None:
    module = tmp_path / "bad.py"
    module.write_text('cap = policy.get("daily_usd")\nretry = doc["retry"]\ndoc["retry"] = {}\n')
    reads = [hit.split(" ")[1] for hit in string_key_reads(module, policy_keys(), tmp_path)]
    assert reads == ["daily_usd", "retry"]
