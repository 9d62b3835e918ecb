"""The demo's step headers: plain lines where no one watches a terminal, a live line (rich) where one does."""

import io

from gpuharness.demo.steps import PREFIX, Steps


def test_steps_are_plain_lines_off_a_terminal():
    out = io.StringIO()
    steps = Steps(2, stream=out)
    steps.begin("provision")
    steps.note("dep_a configured")
    steps.begin("the health suite")
    steps.end()
    steps.end()  # a second end says nothing more
    lines = out.getvalue().splitlines()
    assert lines[0] == f"{PREFIX} 1/2: provision"
    assert lines[1] == "  dep_a configured"
    assert lines[2].startswith("  done in ") and lines[2].endswith(" s")
    assert lines[3] == f"{PREFIX} 2/2: the health suite"
    assert len(lines) == 5 and lines[4].startswith("  done in ")


def test_steps_on_a_terminal_draw_a_live_line_and_keep_the_headers():
    out = io.StringIO()
    steps = Steps(1, stream=out, live=True)
    steps.begin("the [bold]audit[/bold] suite")  # shown as written, never read as rich markup
    steps.note("1/3: audit: collected 61 check(s)")
    steps.end()
    text = out.getvalue()
    assert f"{PREFIX} 1/1: the [bold]audit[/bold] suite" in text
    assert "done in " in text
