"""Episode memory: what the same action got earlier in the episode, by its line or, for a structured call, by tool
and arguments (a log may record the same call once with a raw line and once without)."""

from __future__ import annotations

from worldsmith.sim.base import action_line
from worldsmith.sim.sources.base import Step
from worldsmith.sim.sources.memory import EpisodeMemory
from worldsmith.traces.model import Action


def _step(action: Action, line: str | None = None) -> Step:
    arguments = dict(action.arguments)
    return Step(action, action.name, arguments, line if line is not None else action_line(action), 1, {})


def test_a_structured_call_is_remembered_whatever_its_recorded_line() -> None:
    memory = EpisodeMemory({}, {})
    memory.reset("")
    bare = Action(name="find_user", arguments={"email": "a@x.org", "site": "eu"})
    memory.observe(_step(bare), "u_1")
    logged = Action(name="find_user", arguments={"site": "eu", "email": "a@x.org"},
                    raw="find_user(email='a@x.org', site='eu')")
    [recalled] = memory.propose(_step(logged, line=logged.raw))
    assert (recalled.source, recalled.observation) == ("memory", "u_1")
    other = Action(name="find_user", arguments={"email": "b@x.org", "site": "eu"})
    assert memory.propose(_step(other, line="find_user(email='b@x.org', site='eu')")) == []


def test_an_action_given_as_text_is_remembered_by_its_line_only() -> None:
    memory = EpisodeMemory({}, {})
    memory.reset("")
    memory.observe(_step(Action(name="take", raw="take apple"), line="take apple"), "Taken.")
    assert [p.observation for p in memory.propose(_step(Action(name="take", raw="take apple"), line="take apple"))] \
        == ["Taken."]
    assert memory.propose(_step(Action(name="take", raw="take the apple"), line="take the apple")) == []
