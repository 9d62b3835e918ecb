"""Specifications of UserError: one line, with the file, the place, what is wrong and what to do."""

from __future__ import annotations

from gpuharness.core.errors import EXIT_USAGE, UserError


def test_line_names_file_place_what_and_hint() -> None:
    error = UserError("bad enum", path="/r/deployments.json", place="$.deployments[0].status", hint="fix it")
    assert error.line() == "/r/deployments.json:$.deployments[0].status: bad enum (fix it)"
    assert str(error) == error.line()


def test_line_without_path_or_place() -> None:
    assert UserError("give --cost-hr").line() == "give --cost-hr"
    assert UserError("x", place="economics").line() == "economics: x"
    assert UserError("x", path="f.json").line() == "f.json: x"


def test_newlines_never_split_the_line() -> None:
    line = UserError("first\nsecond", path="f", hint="a\nb").line()
    assert "\n" not in line and "first second" in line


def test_a_long_message_is_elided_in_the_middle() -> None:
    line = UserError("A" * 5000 + " is not of type 'number'", path="p.json", place="$.x").line()
    assert len(line) < 900 and line.endswith("is not of type 'number'")


def test_cli_exit_code_for_user_errors_is_2() -> None:
    assert EXIT_USAGE == 2
