"""One example per command, printed at the end of its --help (every leaf command has one: a test walks them)."""

from __future__ import annotations

import argparse
from typing import Final

EXAMPLES: Final[dict[str, str]] = {
    "init": "gpuharness init",
    "validate": "gpuharness validate --registry .pi/gpu",
    "ledger append": "gpuharness ledger append --line '{\"job_id\": \"J-1\", ...}'",
    "ledger show": "gpuharness ledger show --job J-000001",
    "spend": "gpuharness spend --by day --json",
    "bill": "gpuharness bill --provider runpod --since 2026-12-01 --json",
    "economics": "gpuharness economics --deployment dep_try_01 --avg-job-minutes 3",
    "providers add": "gpuharness providers add vast --kind vast --key-env VAST_API_KEY",
    "providers check": "gpuharness providers check --provider vast",
    "offers": "gpuharness offers --gpu \"RTX 4090\" --max-cost-hr 0.50",
    "sim serve": "gpuharness sim serve --port 0 --configure --detach",
    "sim stop": "gpuharness sim stop",
    "diagnose": "gpuharness diagnose service.log",
    "gpus": "gpuharness gpus --from nvidia-smi-q.txt",
    "status": "gpuharness status --refresh",
    "plan make": "gpuharness plan make --provider vast --gpu \"RTX 4090\" --image comfy:1",
    "plan apply": "gpuharness plan apply .pi/gpu/plans/plan.json --yes",
    "provision": ("gpuharness provision --provider vast --gpu \"RTX 4090\" --image comfy:1 --runtime comfyui "
                  "--idle-minutes 15 --id dep_try_01"),
    "install": "gpuharness install dep_try_01",
    "configure": "gpuharness configure dep_try_01",
    "guard": "gpuharness guard dep_try_01",
    "run": "gpuharness run dep_try_01 --inputs '{\"text\": \"a cat\"}'",
    "retrieve": "gpuharness retrieve dep_try_01 --to outputs",
    "destroy": "gpuharness destroy dep_try_01 --confirm dep_try_01",
    "reap": "gpuharness reap --apply",
    "demo": "gpuharness demo",
    "check": "gpuharness check health --gpu-mode live --deployment dep_try_01",
    "workflow check": "gpuharness workflow check graph.json --server http://127.0.0.1:8188",
    "workflow add": "gpuharness workflow add --from graph.json --id my-workflow --model my-model",
    "workflow show": "gpuharness workflow show my-workflow",
    "workflow list": "gpuharness workflow list",
}


def leaf_commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict[str, argparse.ArgumentParser]:
    """Every command that runs something ("plan make"), by its words, with its parser."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found |= leaf_commands(sub, (*path, name))
    if path and not found:
        found[" ".join(path)] = parser
    return found


def attach(parser: argparse.ArgumentParser) -> None:
    """End each command's --help with its example (a command given its own epilog keeps it)."""
    for words, sub in leaf_commands(parser).items():
        if words in EXAMPLES and not sub.epilog:
            sub.epilog = f"example: {EXAMPLES[words]}"
