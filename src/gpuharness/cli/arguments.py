"""Types of the command line's numeric options: finite, never negative, and never a number too long to read."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Final, NoReturn

from gpuharness.core.errors import UserError
from gpuharness.core.secrets import redact

#: More digits than any amount, count or duration this harness takes (Python's int() gives up at 4,300).
MAX_DIGITS: Final = 30


def _shown(text: str) -> str:
    text = redact(text)  # before the cut: a key cut in two is no longer found
    return repr(text if len(text) <= 40 else f"{text[:16]}…{text[-8:]} ({len(text)} characters)")


def _number(text: str, *, above_zero: bool) -> float:
    try:
        value = float(text) if len(text) <= MAX_DIGITS * 2 else math.inf
    except ValueError:
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a number") from None
    if not math.isfinite(value) or value < 0 or (above_zero and value == 0):
        bound = "above 0" if above_zero else "0 or more"
        raise argparse.ArgumentTypeError(f"{_shown(text)} is not a finite number {bound}")
    return value


def positive(text: str) -> float:
    """A finite number above 0: minutes, hours, seconds of a deadline."""
    return _number(text, above_zero=True)


def non_negative(text: str) -> float:
    """A finite number, 0 or more: a price, minutes of a gap."""
    return _number(text, above_zero=False)


def whole(*, minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """An integer between minimum and maximum (a count, a size in GB, a port, a version)."""
    bound = f"from {minimum}" + (f" to {maximum}" if maximum is not None else "")

    def parse(text: str) -> int:
        digits = text.strip().lstrip("+-")
        if not digits.isdigit() or not digits.isascii():
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number")
        if len(digits) > MAX_DIGITS:
            raise argparse.ArgumentTypeError(f"{_shown(text)} has too many digits (a whole number {bound})")
        value = int(text)
        if value < minimum or (maximum is not None and value > maximum):
            raise argparse.ArgumentTypeError(f"{_shown(text)} is not a whole number {bound}")
        return value

    parse.__name__ = "whole number"
    return parse


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a usage error is a UserError: one line (no usage block) and exit 2, like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UserError(message, place=self.prog.partition(" ")[2] or None, hint=f"see {self.prog} --help")


def timeout_option(parser: argparse.ArgumentParser, default: float, what: str) -> None:
    """--timeout S: seconds (a time of day is --deadline, on provision only). The old spelling --deadline S
    still works here, unlisted."""
    parser.add_argument("--timeout", dest="deadline", type=positive, default=default, metavar="S",
                        help=f"{what} (default {default:g})")
    parser.add_argument("--deadline", dest="deadline", type=positive, default=default, help=argparse.SUPPRESS)
