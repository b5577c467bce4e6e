"""Text metrics against hand-computed cases."""

from __future__ import annotations

import pytest

from worldsmith.evals import METRICS, edit_similarity, exact_match, flatten_json, json_f1, score, token_f1, tokenize


def test_exact_match_ignores_whitespace_only() -> None:
    assert exact_match("You see  a mug.\n", "You see a mug.") == 1.0
    assert exact_match("\tYou see a mug.", "You see a mug. ") == 1.0
    assert exact_match("You see a mug", "You see a mug.") == 0.0
    assert exact_match("you see a mug.", "You see a mug.") == 0.0  # case counts


def test_edit_similarity_is_one_minus_normalised_levenshtein() -> None:
    assert edit_similarity("kitten", "sitting") == pytest.approx(1 - 3 / 7)  # 3 edits, longer text has 7
    assert edit_similarity("", "") == 1.0
    assert edit_similarity("abc", "") == 0.0
    assert edit_similarity("a  b", "a b") == 1.0  # whitespace-normalised first


def test_token_f1_hand_computed() -> None:
    assert tokenize("You open the drawer 1.") == ["you", "open", "the", "drawer", "1", "."]
    assert token_f1("the cat sat", "the cat ran") == pytest.approx(2 / 3)  # P = R = 2/3
    # 6 predicted tokens all in the 10 reference tokens: P = 1, R = 0.6, F1 = 0.75
    assert token_f1("You open the drawer 1.", "You open the drawer 1. It is empty.") == pytest.approx(0.75)
    assert token_f1("a a a", "a") == pytest.approx(0.5)  # multisets: overlap 1, P = 1/3, R = 1
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
    result = score("You see a mug.", "You see a mug 1.")
    assert set(result) == set(METRICS)
    assert result["exact_match"] == 0.0 and result["json_f1"] is None
    assert 0 < result["edit_similarity"] < 1 and 0 < result["token_f1"] < 1
