"""The planner server: the current state as SAS text, the server's protocol, and plans as the in-process planner's."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from worldsmith.envs.alfworld import ALFWorldEnv, default_games_root
from worldsmith.envs.alfworld.planner import PlannerServer, current_sas

SAS = "\n".join([
    "begin_version", "3", "end_version",
    "begin_variable", "var0", "-1", "2", "Atom open(door)", "NegatedAtom open(door)", "end_variable",
    "begin_variable", "var1", "-1", "3", "Atom at(a)", "Atom at(b)", "Atom at(c)", "end_variable",
    "begin_state", "1", "0", "end_state",
    "begin_goal", "1", "1 2", "end_goal",
])


def test_current_sas_sets_the_initial_state_and_keeps_the_rest() -> None:
    changed = current_sas(SAS, ["Atom open(door)", "Atom at(c)"]).split("\n")
    start = changed.index("begin_state")
    assert changed[start + 1:start + 3] == ["0", "2"]
    assert changed[:start] == SAS.split("\n")[:start] and changed[start + 3:] == SAS.split("\n")[start + 3:]


@pytest.mark.parametrize("atoms", [["Atom open(door)", "Atom at(d)"], ["Atom open(door)"]])
def test_current_sas_refuses_a_state_that_does_not_fit(atoms: list[str]) -> None:
    with pytest.raises(ValueError):
        current_sas(SAS, atoms)


class _FakeLib:
    """Fast Downward's library as `plan` calls it: remembers the SAS text, plans the given names."""

    def __init__(self, names: list[str] | None) -> None:
        self.names = names

    def load_sas(self, sas: bytes) -> None:
        if b"broken" in sas:
            raise RuntimeError("cannot read this task")

    def load_sas_replan(self, sas: bytes) -> None:
        self.loaded = sas

    def replan(self, verbose: bool) -> bool:
        return self.names is not None

    def get_last_plan_length(self) -> int:
        return len(self.names or [])

    def get_last_plan(self, operators: Any) -> None:
        for operator, name in zip(operators, self.names or [], strict=True):
            operator._name = name.encode()


@pytest.mark.parametrize(
    ("names", "sas", "expected"),
    [
        (["gotolocation agent1 loc1", "openobject agent1 door"], "task",
         [["gotolocation agent1 loc1", "openobject agent1 door"]]),
        (None, "task", [[]]),  # the planner finds no plan
        (["x"], "broken", [None]),  # the child fails
    ],
)
def test_the_server_answers_one_line_per_request(names: list[str] | None, sas: str, expected: list[Any]) -> None:
    pytest.importorskip("fast_downward", reason="textworld[pddl] is not installed")
    from worldsmith.envs.alfworld import planner_server

    answers = io.BytesIO()
    request = json.dumps({"sas": sas, "sas_replan": "replan", "verbose": False}).encode() + b"\n"
    planner_server.serve(_FakeLib(names), [request], answers)
    assert [json.loads(line) for line in answers.getvalue().splitlines()] == expected


@pytest.fixture(scope="module")
def midgame() -> Any:
    """The bundled heat-and-place game two moves in, whose plan from here is known to be short."""
    pytest.importorskip("alfworld", reason="alfworld is not installed (pip install 'worldsmith[envs]')")
    pytest.importorskip("textworld.envs.pddl", reason="textworld[pddl] is not installed")
    env = ALFWorldEnv()
    tasks = [task for task in env.tasks() if "/pick_heat_then_place_in_recep-Apple-None-Fridge-6/" in f"/{task}"]
    if not tasks:
        pytest.skip(f"the bundled heat-and-place game is not among the ALFWorld games at {default_games_root()}")
    env.reset(tasks[0])
    for command in ("go to countertop 4", "take apple 3 from countertop 4"):
        env.step(command)
    yield env
    env.close()


@pytest.mark.integration
def test_the_server_plans_what_the_game_itself_plans(midgame: ALFWorldEnv) -> None:
    core = midgame._env.unwrapped
    server = PlannerServer()
    try:
        plan = server.replan(core._pddl_state, core._entity_infos, 120.0)
    finally:
        server.close()
    assert plan == list(core._pddl_state.replan(core._entity_infos))  # the same library, in this process
    assert plan and plan[0] == "go to microwave 1" and plan[-1] == "put apple 3 in/on fridge 1"


@pytest.mark.integration
def test_a_search_out_of_time_replaces_the_server(midgame: ALFWorldEnv) -> None:
    core = midgame._env.unwrapped
    server = PlannerServer()
    try:
        assert server.replan(core._pddl_state, core._entity_infos, 0.001) is None
        assert server._process is None  # stopped, with the search it ran
        assert server.replan(core._pddl_state, core._entity_infos, 120.0)
        first = server._process
        assert first is not None and server.replan(core._pddl_state, core._entity_infos, 120.0)
        assert server._process is first  # one server for the searches that end in time
    finally:
        server.close()
    assert first.poll() is not None
