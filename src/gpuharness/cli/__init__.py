"""The `gpuharness` command line: subcommands are registered by the modules in COMMAND_MODULES."""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from gpuharness.core import terminal
from gpuharness.core.errors import EXIT_USAGE, GpuharnessError, UserError  # noqa: F401  (re-exported)
from gpuharness.core.registry import Registry

#: Each module defines `register(subparsers, common)`; a new command family adds one line here.
COMMAND_MODULES: tuple[str, ...] = (
    "gpuharness.cli.registry_cmds",
    "gpuharness.cli.provider_cmds",
    "gpuharness.cli.bill_cmds",
    "gpuharness.cli.sim_cmds",
    "gpuharness.cli.diagnose_cmds",
    "gpuharness.cli.plan_cmds",
    "gpuharness.cli.lifecycle_cmds",
    "gpuharness.cli.workflow_cmds",
)

Handler = Callable[[argparse.Namespace], int]


def common_parent() -> argparse.ArgumentParser:
    """Options every command takes: --registry DIR and --json."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument("--registry", metavar="DIR", default=None,
                        help="registry directory (default: $GPUHARNESS_REGISTRY or .pi/gpu)")
    parent.add_argument("--json", action="store_true", help="print machine-readable JSON")
    return parent


def build_parser() -> argparse.ArgumentParser:
    from gpuharness.cli.arguments import OneLineParser

    parser = OneLineParser(
        prog="gpuharness",
        description="Verify, audit and operate rented GPU workloads (state in .pi/gpu/).")
    from gpuharness.core.version import __version__
    parser.add_argument("--version", action="version", version=f"gpuharness {__version__}",
                        help="print the version and exit")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    common = common_parent()
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers, common)
    from gpuharness.cli.examples import attach

    attach(parser)
    import shtab

    shtab.add_argument_to(parser, ["--print-completion"], help="print a shell completion script (bash, zsh, tcsh)")
    return parser


def existing_registry(args: argparse.Namespace) -> Registry:
    """The registry named by --registry / $GPUHARNESS_REGISTRY; every command but `init` refuses a missing one."""
    return Registry.existing(getattr(args, "registry", None))


def show(text: str, *, err: bool = False) -> None:
    """The command line's one way to print: every control character from outside is escaped (core.terminal)."""
    terminal.show(text, file=sys.stderr if err else sys.stdout)


def emit(args: argparse.Namespace, payload: Any, text: str) -> None:
    """Print JSON with --json, else the human text."""
    if getattr(args, "json", False):
        show(json.dumps(payload, indent=2, default=str))
    else:
        show(text)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script. Any GpuharnessError -> one line on stderr, exit by its class."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
        Registry.locate(getattr(args, "registry", None))  # its providers' keys are redacted from all it prints
        handler: Handler = args.handler
        return handler(args)
    except GpuharnessError as exc:  # the one place the exit code is read from the class (core.errors)
        show(f"gpuharness: error: {exc.line()}", err=True)
        return exc.exit_code
    except KeyboardInterrupt:
        show("gpuharness: interrupted", err=True)
        return 130
    except BrokenPipeError:
        # The reader went away (`gpuharness ... | head`): stop quietly, as other Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
