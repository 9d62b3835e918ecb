"""Commands that read failure evidence: `diagnose` (classify a failure log) and `gpus` (parse nvidia-smi, or compare
the measured figures of past deployments with `--history`)."""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path
from typing import Any

from gpuharness.cli import emit, existing_registry, show
from gpuharness.cli.arguments import positive
from gpuharness.core import regular_file
from gpuharness.core.errors import EXIT_USAGE, UserError
from gpuharness.diagnose import classify_file, classify_stream
from gpuharness.gpu import performance_history
from gpuharness.gpu.nvidia_smi import SmiParseError, SmiReport, parse_output, run_local
from gpuharness.gpu.smi_query import is_query, parse_query


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "diagnose", parents=[common],
        help="classify a failure log (cuda_oom, driver_mismatch, custom_node_import, custom_node_missing, "
             "model_missing, weights_corrupt, disk_full, bad_input, unknown) with the decisive line and the remedy")
    p.add_argument("log", nargs="?", default="-", metavar="LOG",
                   help="log file, ComfyUI /history or RunPod error JSON; '-' or nothing reads stdin")
    p.set_defaults(handler=cmd_diagnose)

    p = subparsers.add_parser(
        "gpus", parents=[common],
        help="parse nvidia-smi output (table, CSV, -q, -q -x, or an error) from --from FILE, else run the local "
             "nvidia-smi; "
             "--history compares the GPU figures measured on past deployments of each class and provider")
    p.add_argument("--from", dest="source", metavar="FILE", help="saved nvidia-smi output ('-' reads stdin)")
    p.add_argument("--history", action="store_true",
                   help="compare the figures recorded in deployments' health evidence, per GPU class and provider")
    p.add_argument("--gpu", help="with --history: only this GPU class (an order name or the nvidia-smi name)")
    p.add_argument("--provider", help="with --history: only this provider")
    p.add_argument("--fields", help="comma-separated --query-gpu fields of a headerless CSV (required for one)")
    p.add_argument("--timeout", type=positive, default=20.0, help="deadline for the local nvidia-smi (seconds)")
    p.set_defaults(handler=cmd_gpus)


def cmd_diagnose(args: argparse.Namespace) -> int:
    if args.log == "-":
        # Only "\n" ends a line (no universal-newline translation), as for files.
        stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace", newline="\n")
        diagnosis = classify_stream(stdin)
        origin = "<stdin>"
    else:
        path = Path(args.log)
        try:  # a regular file only (core.regular_file): a FIFO, a device or a directory is one line
            diagnosis = classify_file(path)
        except FileNotFoundError:
            raise UserError("no such log file", path=path, hint="give a log file, or '-' to read stdin") from None
        except OSError as exc:
            raise UserError(f"cannot read log: {exc.strerror or exc}", path=path) from None
        origin = str(path)
    payload = {"log": origin, **diagnosis.to_json()}
    emit(args, payload, f"{origin}: {diagnosis.explain()}")
    return 0


def cmd_gpus(args: argparse.Namespace) -> int:
    if args.history:
        return _history(args)
    if args.gpu or args.provider:
        raise UserError("--gpu and --provider select deployments of --history", place="gpus",
                        hint="add --history, or drop them")
    fields = tuple(f.strip() for f in args.fields.split(",") if f.strip()) if args.fields else None
    if args.source is None:
        report = run_local(timeout_s=args.timeout)
        origin = "nvidia-smi"
    else:
        origin = "<stdin>" if args.source == "-" else args.source
        text = sys.stdin.read() if args.source == "-" else _read(Path(args.source))
        report = _parse_saved(text, fields, origin)
    emit(args, {"source": origin, **report.to_json()}, _text(origin, report))
    if report.error is not None:
        show(f"gpuharness: error: {origin}: {report.error}: {report.error_line} ({report.remedy})", err=True)
        return EXIT_USAGE
    return 0


def _parse_saved(text: str, fields: tuple[str, ...] | None, origin: str) -> SmiReport:
    """Saved output: `-q`, `-q -x`, the table or CSV; a headerless CSV needs `--fields` (columns are not guessed)."""
    try:
        if is_query(text):
            return parse_query(text)
        return parse_output(text, fields, guess=False)
    except SmiParseError as exc:
        raise UserError(str(exc), path=origin, hint="pass --fields with the --query-gpu list, "
                        "e.g. --fields index,name,memory.total") from None
    except (ValueError, SyntaxError) as exc:  # ET.ParseError is a SyntaxError
        raise UserError(f"unreadable nvidia-smi -q -x output: {exc}", path=origin) from None


def _history(args: argparse.Namespace) -> int:
    if args.source is not None or args.fields:
        raise UserError("--history reads the registry, not nvidia-smi output", place="gpus",
                        hint="drop --from/--fields, or drop --history")
    registry = existing_registry(args)
    groups = performance_history.compare(registry.deployments(), gpu=args.gpu, provider=args.provider)
    emit(args, {"registry": str(registry.root), "groups": [g.to_json() for g in groups]},
         performance_history.text(groups))
    return 0


def _read(path: Path) -> str:
    """nvidia-smi output saved to a file: a regular file under its cap (core.regular_file)."""
    if not os.path.lexists(path):
        raise UserError("no such file", path=path, hint="save `nvidia-smi` output to a file, or use --from -")
    return regular_file.read_named(path, what="nvidia-smi output").decode("utf-8", errors="replace")


def _text(origin: str, report: SmiReport) -> str:
    head = f"{origin}: {report.layout}"
    if report.driver_version:
        head += f", driver {report.driver_version}"
    if report.cuda_version:
        head += f", CUDA {report.cuda_version}"
    lines = [head]
    for number, gpu in enumerate(report.gpus):
        memory = ("memory n/a" if gpu.memory_total_mib is None else f"{gpu.memory_total_mib} MiB total"
                  if gpu.memory_used_mib is None else f"{gpu.memory_used_mib}/{gpu.memory_total_mib} MiB")
        extras = [f"{gpu.temperature_c}C" if gpu.temperature_c is not None else None,
                  f"{gpu.utilization_pct}%" if gpu.utilization_pct is not None else None,
                  f"{gpu.power_draw_w:g}W" if gpu.power_draw_w is not None else None,
                  ",".join(gpu.clock_event_names) or None]
        index = gpu.index if gpu.index is not None else number
        lines.append(f"  [{index}] {gpu.name or '(name not queried)'}  {memory}  " + "  ".join(e for e in extras if e))
    if report.error:
        lines.append(f"error: {report.error}: {report.error_line}")
    return "\n".join(lines)
