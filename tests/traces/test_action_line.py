"""`action_line`: the one Action -> text function, with the prompt and the environment-command forms."""

from __future__ import annotations

import pytest

from worldsmith.envs.base import action_text as env_action_text
from worldsmith.llm import tiny
from worldsmith.sim.base import action_line as sim_action_line
from worldsmith.traces import Action, action_line


def test_the_three_old_names_are_the_one_function() -> None:
    assert sim_action_line is action_line
    with pytest.deprecated_call(match="action_line"):
        assert tiny.action_text is action_line
    call = Action(name="search", arguments={"query": "mug", "limit": 2})
    with pytest.deprecated_call(match="action_line"):
        assert env_action_text(call) == action_line(call, command=True) == "search"


def test_prompt_lines_show_every_argument() -> None:
    assert action_line(Action(name="go", arguments={"text": "north"})) == "go north"
    assert action_line(Action(name="search", arguments={"query": "mug"})) == 'search {"query": "mug"}'
    assert action_line(Action(name="call", raw=' {"a": 1} ', arguments={"a": 1})) == 'call {"a": 1}'
    assert action_line(Action(name="go", raw="  go to cabinet 1 ")) == "go to cabinet 1"


def test_command_lines_are_what_a_player_types() -> None:
    assert action_line(Action(name="go", raw="  go to cabinet 1 "), command=True) == "  go to cabinet 1 "
    assert action_line(Action(name="go", arguments={"text": "north"}), command=True) == "go north"
    assert action_line(Action(name="look", arguments={}), command=True) == "look"
    assert action_line("open fridge", command=True) == action_line("open fridge") == "open fridge"
