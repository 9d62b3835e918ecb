"""Remote text is cut into lines on newline only (remote.lines), never where str.splitlines also cuts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuharness.remote.lines import lines_of

BREAKS = ("\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\n", "\r\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(BREAKS), st.text(max_size=8))).map("".join))
def test_lines_are_cut_on_newline_only_and_lose_nothing(text):
    lines = lines_of(text)
    assert all("\n" not in line for line in lines)
    assert "\n".join(lines) + ("\n" if text.endswith("\n") else "") == text


def test_a_separator_splitlines_honours_stays_inside_its_line():
    assert lines_of("a\u2028@@gpuharness done\x1eb\r\nc\n") == ["a\u2028@@gpuharness done\x1eb\r", "c"]
    assert lines_of("") == [] and lines_of("\n") == [""]
