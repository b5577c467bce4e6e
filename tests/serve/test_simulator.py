"""`ServedWorldbook` in-process: each opened session is saved, and calls are checked before they are played."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.serve import ServeConfig, ServedWorldbook, ToolArgumentError
from worldsmith.sim import Session
from worldsmith.traces import Episode


def test_sessions_are_saved_apart_and_refused_calls_leave_no_turn(
        served_workspace: tuple[Path, list[Episode]], tmp_path: Path) -> None:
    workspace, episodes = served_workspace
    served = ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace), sessions=str(tmp_path),
                                         initial="hello"))
    turn = episodes[0].turns[0]
    one, two = served.open_session("a"), served.open_session("b")
    first = one.call(turn.action.name, turn.action.arguments)
    with pytest.raises(ToolArgumentError):
        one.call(turn.action.name, {"no_such_argument": 1})
    second = one.call(turn.action.name, turn.action.arguments)
    two.call(turn.action.name, turn.action.arguments)
    directories = [one.session.directory, two.session.directory]
    one.close()
    two.close()
    assert (first.index, second.index) == (0, 1)
    assert sorted(p.name.split("-")[0] for p in tmp_path.iterdir()) == ["a", "b"]
    with Session.open(directories[0]) as stored:
        assert len(stored) == 2 and stored.meta["book_ref"] == served.book_ref
        assert stored.prefix().initial_observation.text == "hello"


def test_an_unknown_world_model_is_refused(served_workspace: tuple[Path, list[Episode]]) -> None:
    workspace, _ = served_workspace
    with pytest.raises(ValueError, match="unknown world model 'oracle'"):
        ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace), method="oracle"))
