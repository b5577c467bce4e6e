"""Word-level scores and diffs of a prediction against the real observation, and their HTML."""

from __future__ import annotations

import pytest

from worldsmith.sim.htmlview import diff_html, escape_html, text_html
from worldsmith.sim.scoring import DiffSegment, edit_similarity, exact_match, observation_score, token_f1, word_diff

REAL = "You arrive at loc 22. On the bed 1, you see a book 1, a cellphone 1, and a pillow 1."


def test_exact_match_ignores_only_runs_of_whitespace() -> None:
    assert exact_match("You see  a\nbook 1. ", "You see a book 1.") == 1.0
    assert exact_match("you see a book 1.", "You see a book 1.") == 0.0  # case counts
    assert exact_match("", "") == 1.0


def test_token_f1_is_bag_of_words_f1() -> None:
    assert token_f1("a b c d", "a b c d") == 1.0
    assert token_f1("d c b a", "a b c d") == 1.0  # order does not matter
    # 2 common of 4 predicted and 2 reference words: precision 0.5, recall 1.0
    assert token_f1("a b x y", "a b") == pytest.approx(2 * 0.5 * 1.0 / 1.5)
    assert token_f1("", "") == 1.0 and token_f1("a", "") == 0.0 and token_f1("x", "y") == 0.0
    assert token_f1("Nothing happens.", "nothing happens") == 1.0  # lower-case words, punctuation ignored


def test_edit_similarity_is_normalised_word_levenshtein() -> None:
    assert edit_similarity("a b c d", "a b c d") == 1.0
    assert edit_similarity("d c b a", "a b c d") == 0.0  # order matters here (4 substitutions of 4)
    assert edit_similarity("a b c", "a x c d") == pytest.approx(1 - 2 / 4)  # one substitution, one insertion
    assert edit_similarity("", "") == 1.0 and edit_similarity("", "a b") == 0.0


def test_score_bundles_the_three() -> None:
    same = observation_score(REAL, REAL)
    assert (same.exact, same.f1, same.edit) == (1.0, 1.0, 1.0)
    missing = observation_score(REAL.replace(", a cellphone 1", ""), REAL)
    assert missing.exact == 0.0 and 0.8 < missing.f1 < 1.0 and 0.8 < missing.edit < 1.0


def test_word_diff_segments_rebuild_both_texts() -> None:
    predicted = "You arrive at loc 4. On the bed 1, you see a book 1, a laptop 1, and a pillow 1."
    segments = word_diff(predicted, REAL)
    assert {s.op for s in segments} == {"equal", "insert", "delete"}
    mine = "".join(s.text for s in segments if s.op != "delete")
    theirs = "".join(s.text for s in segments if s.op != "insert")
    assert mine == predicted and " ".join(theirs.split()) == REAL
    cut = word_diff("You pick up the box 1", "You pick up the box 1 from the table 1.")
    assert "".join(s.text for s in cut if s.op != "insert") == "You pick up the box 1 from the table 1."
    assert DiffSegment(op="delete", text="22. ") in segments and DiffSegment(op="insert", text="4. ") in segments
    assert word_diff(REAL, REAL) == [DiffSegment(op="equal", text=REAL)]
    assert word_diff("", REAL) == [DiffSegment(op="delete", text=REAL)]


def test_html_escapes_untrusted_text_for_markdown() -> None:
    nasty = "<script>alert(1)</script> **bold** [link](http://x) $x$ :smile: a_b\n\nnext"
    escaped = escape_html(nasty)
    for raw in ("<script", "**", "[link]", "$x$", ":smile:", "a_b", "\n"):
        assert raw not in escaped
    assert "&lt;script&gt;" in escaped and escaped.count("<br>") == 2
    block = text_html(nasty)
    assert block.startswith("<div") and "\n" not in block  # one line: markdown keeps it as a raw HTML block
    coloured = diff_html(word_diff("a <b> c", "a d c"))
    assert '<span style="background:#ffd7d5' in coloured and "&lt;b&gt;" in coloured  # said, not real: red
    assert '<span style="background:#ccf5d3' in coloured  # real, left out: green
    assert escape_html("(empty observation)") in diff_html([])
