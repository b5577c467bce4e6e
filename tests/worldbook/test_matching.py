"""Template matching without regular expressions reads what the regex reading read, slot for slot.

`engine.match_template` and `facts.whole_word_spans` replaced patterns compiled per call; the reference
implementations below are those patterns, and random templates over a small alphabet (so literals recur, slots sit
side by side and observations fit in several ways) must give the same answers.
"""

from __future__ import annotations

import random
import re
from typing import Any

import pytest

from worldsmith.worldbook.engine import _pieces, apply_effects, match_template
from worldsmith.worldbook.facts import parse_list_items, whole_word_spans
from worldsmith.worldbook.model import Effect, Evidence
from worldsmith.worldbook.rule_replay import MatchMemo

_ALPHABET = ["a", "b", "ab", " ", ",", "a 1", "{{", "}}", "x_"]
_SLOTS = ["{arg.object}", "{arg.target}", "{world.contents[arg.target]}", "{world.inventory}", "{world.x.y}",
          "{world.x.y}", "{arg.missing}", "{world.z[arg.missing]}"]


def regex_match_template(template: str, observation: str, arguments: dict[str, Any]) -> Any:
    """The regex reading that `match_template` replaced, kept as the reference."""
    pattern: list[str] = []
    groups: list[tuple[str, ...]] = []
    for piece in _pieces(template):
        if piece is None:
            return None
        if isinstance(piece, str):
            pattern.append(re.escape(piece))
        elif piece.arg is not None:
            if piece.arg not in arguments:
                return None
            pattern.append(re.escape(str(arguments[piece.arg])))
        else:
            segments = piece.segments(arguments)
            if segments is None:
                return None
            pattern.append(f"(?P<g{len(groups)}>.*?)")
            groups.append(tuple(segments))
    match = re.fullmatch("".join(pattern), observation, re.DOTALL)
    if match is None:
        return None
    values: dict[tuple[str, ...], Any] = {}
    for index, path in enumerate(groups):
        text = match.group(f"g{index}")
        parsed = parse_list_items(text)
        listy = len(path) >= 2 and (path[1] == "contents" or len(path) == 2)
        value = parsed[0] if parsed is not None and listy else text
        if path in values and values[path] != value:
            return None
        values[path] = value
    return values


def _random_template(rng: random.Random) -> str:
    return "".join(rng.choice(_SLOTS) if rng.random() < 0.3 else rng.choice(_ALPHABET)
                   for _ in range(rng.randint(0, 7)))


def _random_text(rng: random.Random, length: int) -> str:
    return "".join(rng.choice(["a", "b", " ", ",", "1", "{", "}", "_", "\n", "é"]) for _ in range(length))


def test_random_templates_read_the_same_as_the_regex_reading() -> None:
    rng = random.Random(7)
    arguments = {"object": "a", "target": "b 1", "count": 3}
    checked = fitted = 0
    for _ in range(4000):
        template = _random_template(rng)
        # Observations: random text, and the template rendered with random fillings (so many fit).
        filled = "".join(piece if isinstance(piece, str) else
                         (str(arguments.get(piece.arg, "?")) if piece is not None and piece.arg else
                          _random_text(rng, rng.randint(0, 4)))
                         for piece in _pieces(template))
        for observation in (filled, _random_text(rng, rng.randint(0, 8))):
            expected = regex_match_template(template, observation, arguments)
            assert match_template(template, observation, arguments) == expected, (template, observation)
            checked += 1
            fitted += expected is not None
    assert fitted > checked // 4  # the comparison covered matches, not only misfits


@pytest.mark.parametrize(("template", "observation", "expected"), [
    ("On the {arg.target}, you see {world.contents[arg.target]}.", "On the b 1, you see a pen 1, and a cup 2.",
     {("world", "contents", "b 1"): ["pen 1", "cup 2"]}),
    ("{world.x.y}{world.x.z}", "abc", {("world", "x", "y"): "", ("world", "x", "z"): "abc"}),
    ("{world.x.y}, {world.x.z}.", "a, b, c.", {("world", "x", "y"): "a", ("world", "x", "z"): "b, c"}),
    ("ab{world.x.y}ba", "aba", None),
    ("{{{arg.object}}}", "{a}", {}),
])
def test_slots_are_as_short_as_the_rest_allows(template: str, observation: str, expected: Any) -> None:
    assert match_template(template, observation, {"object": "a", "target": "b 1"}) == expected


def test_whole_word_spans_are_what_the_lookaround_pattern_finds() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        text = _random_text(rng, rng.randint(0, 12))
        value = _random_text(rng, rng.randint(1, 3))
        pattern = re.compile(rf"(?<!\w){re.escape(value)}(?!\w)")
        assert whole_word_spans(text, value) == [m.span() for m in pattern.finditer(text)], (text, value)


def test_a_memo_matches_each_turn_and_template_once() -> None:
    item = Evidence(turn_id="e#0", action="look", arguments={"target": "desk 1"}, action_text="look desk 1",
                    observation="On the desk 1, you see a pen 1.")
    memo = MatchMemo()
    template = "On the {arg.target}, you see {world.contents[arg.target]}."
    first = memo.match(template, item)
    assert first == {("world", "contents", "desk 1"): ["pen 1"]}
    assert memo.match(template, item) is first
    assert memo.match("Nothing happens.", item) is None


def test_effects_copy_the_state_as_deepcopy_would() -> None:
    shared: list[Any] = ["apple 1"]
    state: dict[str, Any] = {"world": {"contents": {"desk 1": shared, "bag": shared}, "status": {"door": "open"},
                                       "size": 3, "ratio": 0.5, "seen": True, "pair": ("a", ["b"])}}
    new = apply_effects(state, [Effect(op="append", path="world.contents.{arg.target}", value="{arg.object}")],
                        {"target": "desk 1", "object": "pen 1"})
    assert new["world"]["contents"]["desk 1"] == ["apple 1", "pen 1"]
    assert state["world"]["contents"]["desk 1"] == ["apple 1"]  # the input is left untouched
    assert new["world"]["contents"]["bag"] == ["apple 1"] and new["world"]["contents"]["bag"] is not shared
    assert new["world"]["pair"] == ("a", ["b"]) and new["world"]["pair"][1] is not state["world"]["pair"][1]
    assert new["world"]["status"] is not state["world"]["status"]
