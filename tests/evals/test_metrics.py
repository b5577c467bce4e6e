"""Text metrics against hand-computed cases (exact, token F1 and edit similarity are sim.scoring's: one
implementation for the side-by-side view and the reports)."""

from __future__ import annotations

import pytest

from worldsmith.evals import METRICS
from worldsmith.evals.metrics import flatten_json, json_f1, metric_scores
from worldsmith.sim import scoring
from worldsmith.sim.scoring import edit_similarity, exact_match, token_f1, word_tokens


def test_one_implementation_with_the_side_by_side_view() -> None:
    assert edit_similarity is scoring.edit_similarity and token_f1 is scoring.token_f1
    assert exact_match is scoring.exact_match


def test_exact_match_ignores_whitespace_only() -> None:
    assert exact_match("You see  a mug.\n", "You see a mug.") == 1.0
    assert exact_match("\tYou see a mug.", "You see a mug. ") == 1.0
    assert exact_match("You see a mug", "You see a mug.") == 0.0
    assert exact_match("you see a mug.", "You see a mug.") == 0.0  # case counts


def test_edit_similarity_is_one_minus_normalised_word_levenshtein() -> None:
    assert word_tokens("You open the drawer 1.") == ["you", "open", "the", "drawer", "1"]
    # "the cat sat on the mat" -> "the dog sat on mat": 1 substitution + 1 deletion over 6 words
    assert edit_similarity("the dog sat on mat", "the cat sat on the mat") == pytest.approx(1 - 2 / 6)
    assert edit_similarity("", "") == 1.0 and edit_similarity("a b c", "") == 0.0
    long_a = " ".join(f"w{i}" for i in range(3000))
    long_b = " ".join(f"w{i}" for i in range(0, 3000, 2))
    assert edit_similarity(long_b, long_a) == pytest.approx(1 - 1500 / 3000)  # 1500 deletions, C speed


def test_token_f1_hand_computed() -> None:
    assert token_f1("the cat sat", "the cat ran") == pytest.approx(2 / 3)  # P = R = 2/3
    # 5 predicted words all among the 8 reference words: P = 1, R = 5/8, F1 = 10/13
    assert token_f1("You open the drawer 1.", "You open the drawer 1. It is empty.") == pytest.approx(10 / 13)
    assert token_f1("a a a", "a") == pytest.approx(0.5)  # bags of words: overlap 1, P = 1/3, R = 1
    assert token_f1("", "") == 1.0 and token_f1("x", "") == 0.0 and token_f1("x", "y") == 0.0


def test_json_f1_on_path_value_leaves() -> None:
    reference = '{"a": 1, "b": [1, 2]}'
    assert flatten_json({"a": 1, "b": [1, 2]}) == ["$.a=1", "$.b[0]=1", "$.b[1]=2"]
    assert flatten_json({"x": {"y": "z"}, "e": {}, "l": []}) == ['$.x.y="z"', "$.e={}", "$.l=[]"]
    assert json_f1('{"b": [1, 2], "a": 1}', reference) == 1.0  # key order is not content
    assert json_f1('{"a": 1, "b": [1, 3]}', reference) == pytest.approx(2 / 3)  # 2 of 3 leaves on each side
    assert json_f1('{"a": 1}', reference) == pytest.approx(0.5)  # P = 1, R = 1/3
    assert json_f1('{"a": "1", "b": [1, 2]}', reference) == pytest.approx(2 / 3)  # "1" is not 1
    assert json_f1("Error: no such file", reference) == 0.0
    assert json_f1("anything", "You see a mug.") is None


def test_score_has_every_metric() -> None:
    result = metric_scores("You see a mug.", "You see a mug 1.")
    assert set(result) == set(METRICS)
    assert result["exact_match"] == 0.0 and result["json_f1"] is None
    assert result["edit_similarity"] == pytest.approx(1 - 1 / 5) and result["token_f1"] == pytest.approx(8 / 9)
