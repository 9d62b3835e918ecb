"""The one error tree (core.errors): every exception class in gpuharness descends from GpuharnessError and maps to
an exit code, and the command line's exit status follows from the class."""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil

import pytest

import gpuharness
from gpuharness import cli
from gpuharness.core.errors import EXIT_FAILURE, EXIT_USAGE, GpuharnessError, UserError
from gpuharness.providers.base import ProviderError, UnknownOutcome
from gpuharness.remote import RemoteError

#: The fake torch runs on the simulated host by itself: it imports nothing from gpuharness, so it mimics torch's own.
STANDALONE = {"gpuharness.sim.torch_package"}


def _exception_classes() -> list[type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(gpuharness.__path__, "gpuharness."):
        if info.name in STANDALONE or info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            # a Warning is not raised to the command line: pytest's warning machinery reports it
            if issubclass(value, BaseException) and not issubclass(value, Warning) and value.__module__ == info.name:
                found[f"{info.name}.{value.__qualname__}"] = value
    return [found[name] for name in sorted(found)]


def test_the_walk_finds_the_known_classes() -> None:
    classes = _exception_classes()
    assert {UserError, ProviderError, UnknownOutcome, RemoteError} <= set(classes)
    assert len(classes) >= 20


@pytest.mark.parametrize("exc", _exception_classes(), ids=lambda c: c.__qualname__)
def test_every_exception_class_descends_from_the_base_and_maps_to_an_exit_code(exc: type[BaseException]) -> None:
    assert issubclass(exc, GpuharnessError), f"{exc.__module__}.{exc.__qualname__} is outside the error tree"
    assert exc.exit_code in (EXIT_FAILURE, EXIT_USAGE)


class _Parser:
    """A parser whose one command raises the given error."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def parse_args(self, _argv: object = None) -> argparse.Namespace:
        return argparse.Namespace(handler=self._raise)

    def _raise(self, _args: argparse.Namespace) -> int:
        raise self.exc


@pytest.mark.parametrize(("exc", "code"), [
    (UserError("not a number", path="plan.toml", place="line 3"), EXIT_USAGE),
    (ProviderError("auth", "the key was refused", provider="vast"), EXIT_FAILURE),
    (UnknownOutcome("the answer was lost", provider="runpod"), EXIT_FAILURE),
    (RemoteError("unreachable", "no route to host", target="gpu-1"), EXIT_FAILURE),
], ids=["UserError", "ProviderError", "UnknownOutcome", "RemoteError"])
def test_the_cli_exit_code_follows_from_the_class(exc: GpuharnessError, code: int, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "build_parser", lambda: _Parser(exc))
    monkeypatch.setattr(cli.Registry, "locate", staticmethod(lambda _path=None: None))
    assert cli.main([]) == code
    err = capsys.readouterr().err.strip()
    assert err.startswith("gpuharness: error: ") and "\n" not in err
    assert exc.line() in err
