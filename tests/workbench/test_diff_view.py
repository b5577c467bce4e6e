"""The one before/after view (`workbench.common.diff_view`): fields by path, long values folded, words marked,
every value escaped."""

from __future__ import annotations

import json

from workbench.common.diff_view import FOLD, diff_html
from worldsmith.traces import observation_diff


def test_a_long_result_shows_only_the_field_that_changed_with_long_values_folded() -> None:
    before = {"order": {"id": "#W1", "refund": {"amount": 120.5}}, "log": "x" * 500}
    after = {"order": {"id": "#W1", "refund": {"amount": 98.0}}, "log": "y" * 500}
    html = diff_html(observation_diff(json.dumps(before), json.dumps(after)), label="before → after")
    assert "2 changed" in html
    assert "<code>/order/refund/amount</code></td><td>changed</td><td>120.5</td><td>98.0</td>" in html
    assert html.count("<details class=\"ws-diff-fold\">") == 2  # each 500-character value, folded
    assert f"<summary>&quot;{'x' * (FOLD - 1)}… (502 characters)</summary>" in html
    assert "x" * 500 in html  # the whole value, one click away
    assert "#W1" not in html  # an unchanged field is not shown


def test_text_shows_the_words_that_differ() -> None:
    html = diff_html(observation_diff("You see a red apple.", "You see a green apple."), label="b")
    assert "data-kind='text'" in html and "1 word added, 1 word removed" in html
    assert "<del class='ws-diff-del' title='only in the before'>red </del>" in html
    assert "<ins class='ws-diff-ins' title='only in the after'>green </ins>" in html


def test_values_are_escaped() -> None:
    hostile = '<img src=x onerror="alert(1)">'
    for html in (diff_html(observation_diff(json.dumps({"a": 1}), json.dumps({"a": hostile})), label=hostile),
                 diff_html(observation_diff("plain", hostile), label="l")):
        assert "<img" not in html and "&lt;img" in html
    assert "no difference" in diff_html(observation_diff('{"a": 1}', '{"a": 1}'), label="same")
