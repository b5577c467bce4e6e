"""`clip`: the one way text is shortened for prompts and reports."""

from __future__ import annotations

from worldsmith.util import clip


def test_short_text_is_only_stripped() -> None:
    assert clip("  fits  ", 10) == "fits"
    assert clip("  fits  ", 10, strip=False) == "  fits  "


def test_long_text_is_cut_to_the_limit_marker_included() -> None:
    assert clip("  ab cdefgh  ", 4) == "ab…"  # stripped, cut, trailing space of the cut dropped
    assert clip("ab cdefgh", 4, strip=False) == "ab …"
    clipped = clip("x" * 50, 20, strip=False, marker=" …[truncated]")
    assert clipped == "x" * 7 + " …[truncated]" and len(clipped) == 20


def test_a_limit_below_the_marker_keeps_only_the_marker() -> None:
    assert clip("abcdef", 0) == "…"
