"""The command line explains itself: every option has help text, every command's --help ends with an example,
and one option name means one thing (a time of day is --deadline, seconds are --timeout)."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from gpuharness import __version__
from gpuharness.cli import build_parser
from gpuharness.cli.examples import EXAMPLES, leaf_commands

COMMANDS = leaf_commands(build_parser())


def shown_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions
            if a.help != argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction, argparse._VersionAction))]


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_option_of_every_command_has_help_text(words):
    missing = [a.option_strings[0] if a.option_strings else a.dest
               for a in shown_actions(COMMANDS[words]) if not a.help]
    assert not missing, f"gpuharness {words}: options without help text: {missing}"


@pytest.mark.parametrize("words", sorted(COMMANDS))
def test_every_help_ends_with_a_runnable_looking_example(words):
    text = COMMANDS[words].format_help().rstrip()
    last = text.split("\n\n")[-1]  # the last paragraph (a long example wraps)
    assert last.startswith("example: gpuharness " + words), f"gpuharness {words} --help ends with {last!r}"


def test_the_example_table_names_only_commands_there_are():
    assert set(EXAMPLES) <= set(COMMANDS)


def test_one_meaning_per_option_name():
    meanings: dict[str, set[str]] = {}
    for parser in COMMANDS.values():
        for action in shown_actions(parser):
            for option in action.option_strings:
                kind = getattr(action.type, "__name__", str(action.type))
                meanings.setdefault(option, set()).add(kind)
    deadline = [w for w, p in COMMANDS.items() if any("--deadline" in a.option_strings for a in shown_actions(p))]
    assert deadline == ["provision"], f"--deadline (a time) is listed on {deadline}; seconds are --timeout"
    timeouts = meanings.get("--timeout", set())
    assert timeouts == {"positive"}, f"--timeout must be seconds everywhere, found {timeouts}"


def test_the_old_seconds_spelling_still_parses_unlisted():
    args = build_parser().parse_args(["offers", "--gpu", "x", "--deadline", "7"])
    assert args.deadline == 7.0
    assert "--deadline" not in COMMANDS["offers"].format_help()


def test_the_version_is_the_one_pyproject_declares():
    import tomllib

    from checkout import ROOT

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert declared == __version__


def test_version_prints_the_package_version():
    done = subprocess.run([sys.executable, "-m", "gpuharness", "--version"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0 and done.stdout.strip() == f"gpuharness {__version__}"


def test_bash_completion_completes_command_names_in_a_real_bash(tmp_path):
    script = subprocess.run([sys.executable, "-m", "gpuharness", "--print-completion", "bash"], capture_output=True,
                            text=True, timeout=60, check=True).stdout
    (tmp_path / "completion.sh").write_text(script)
    drive = (f"source {tmp_path / 'completion.sh'}\n"
             'COMP_WORDS=(gpuharness prov); COMP_CWORD=1; COMP_LINE="gpuharness prov"; COMP_POINT=${#COMP_LINE}\n'
             "_shtab_gpuharness gpuharness prov gpuharness\n"
             "printf '%s\\n' \"${COMPREPLY[@]}\"\n")
    done = subprocess.run(["bash", "-c", drive], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert sorted(done.stdout.split()) == ["providers", "provision"]
