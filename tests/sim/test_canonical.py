"""One canonical action: every spelling of a call gets the same answer (issue 41, item 1)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sim_support import book_from, opening

from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.canonical import canonical_action, parse_call
from worldsmith.sim.harness import Harness
from worldsmith.traces import Action, Episode
from worldsmith.worldbook.model import ActionSchema, ActionSpec, ArgumentSpec

TOOLSHOP = Path(__file__).resolve().parents[2] / "data_samples" / "toolshop" / "expert.jsonl"


def _toolshop() -> list[Episode]:
    return [Episode.model_validate({k: v for k, v in json.loads(line).items() if k != "format"})
            for line in TOOLSHOP.read_text().splitlines() if line.strip()]


def _spellings(name: str, arguments: dict[str, object]) -> list[object]:
    text = json.dumps(arguments)
    call = ",".join(f"{key}={value!r}" for key, value in arguments.items())
    return [Action(name=name, arguments=arguments), f"{name} {text}", f"{name}({call})",
            {"name": name, "arguments": arguments},  # an MCP tools/call
            {"type": "function", "function": {"name": name, "arguments": text}},  # an OpenAI tool call
            {"id": "call_1", "type": "function", "function": {"name": name, "arguments": arguments}},
            f"{name} " + json.dumps(dict(reversed(list(arguments.items())))),  # another argument order
            Action(name=name, arguments=arguments, call_id="call_9", raw=f"{name}({call})")]


SCHEMA = ActionSchema(actions=[
    ActionSpec(name="get_order", aliases=["order"], arguments=[ArgumentSpec(name="order_id"),
                                                               ArgumentSpec(name="fields", required=False)],
               examples=['get_order {"order_id": "#O1"}']),
    ActionSpec(name="cd", arguments=[ArgumentSpec(name="folder")], examples=["cd(folder='tmp')"]),
    ActionSpec(name="go", arguments=[ArgumentSpec(name="target")], pattern="^go to (?P<target>.+?)$",
               examples=["go to cabinet 1"]),
])


def test_every_spelling_of_a_tool_call_is_one_action() -> None:
    forms = [canonical_action(form, SCHEMA) for form in _spellings("get_order", {"order_id": "#O1", "fields": "all"})]
    assert {(a.name, json.dumps(a.arguments), a.raw, a.call_id) for a in forms} == {
        ("get_order", '{"order_id": "#O1", "fields": "all"}', None, None)}


def test_aliases_resolve_and_call_worlds_keep_their_call_line() -> None:
    assert canonical_action(Action(name="order", arguments={"order_id": "#O2"}), SCHEMA).name == "get_order"
    for form in _spellings("cd", {"folder": "tmp"}):
        action = canonical_action(form, SCHEMA)
        assert (action.name, action.arguments, action.raw) == ("cd", {"folder": "tmp"}, "cd(folder='tmp')")
    assert canonical_action("cd('tmp')", SCHEMA).arguments == {"folder": "tmp"}  # positional, by schema order


def test_text_commands_stay_as_typed_and_calls_of_text_worlds_become_commands() -> None:
    typed = canonical_action("go to cabinet 1", SCHEMA)
    assert (typed.name, typed.raw) == ("go", "go to cabinet 1")
    assert canonical_action({"name": "go", "arguments": {"target": "cabinet 1"}}, SCHEMA).raw == "go to cabinet 1"
    assert canonical_action("look", SCHEMA).raw == "look"


def test_call_syntax_is_read_never_run() -> None:
    assert parse_call("f(a=1, b='x', c=[1, 2])") == ("f", {"a": 1, "b": "x", "c": [1, 2]})
    assert parse_call("f(a=__import__('os').getcwd())") is None  # not a literal: no call at all
    assert parse_call("f(1)") is None  # a positional argument with no schema to name it
    assert parse_call("f(**x)") is None and parse_call("not a call") is None


@pytest.mark.parametrize("model_kind", ["harness", "nearest"])
def test_answers_do_not_depend_on_spelling_on_a_real_book(model_kind: str) -> None:
    episodes = _toolshop()
    book = book_from(episodes[:20], "toolshop-canonical")
    model = Harness(book) if model_kind == "harness" else NearestEvidence(book)
    for episode in episodes[20:26]:
        for turn in range(len(episode.turns)):
            model.start(opening(episode, turn))
            action = episode.turns[turn].action
            if not isinstance(action.arguments, dict) or not action.arguments:
                continue
            answers = {model.predict_aside(form).observation for form in _spellings(action.name, action.arguments)}
            assert len(answers) == 1, (episode.id, turn, action)
