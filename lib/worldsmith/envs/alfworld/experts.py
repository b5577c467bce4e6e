"""ALFWorld's own experts: its planner (run by a `PlannerServer`, stoppable) and its handcoded expert, fed lazily."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from worldsmith.envs.alfworld.planner import PlannerServer

__all__ = ["HandcodedExpert", "PlannerExpert"]


class PlannerExpert:
    """ALFWorld's planner; a plan is followed while the game goes as planned, else recomputed."""

    def __init__(self, server: PlannerServer, timeout: float, replan_every_step: bool) -> None:
        self.server = server
        self.timeout = timeout
        self.replan_every_step = replan_every_step
        self._plan: list[str] = []
        self._planned_at = -1
        self._failed_at = -1

    def next_action(self, pddl_state: Any, entity_infos: Any, history: Sequence[str], admissible: Sequence[str]) -> str | None:
        done = list(history[self._planned_at:]) if self._planned_at >= 0 else None
        if (
            not self.replan_every_step
            and done is not None
            and done == self._plan[: len(done)]
            and len(done) < len(self._plan)
            and self._plan[len(done)] in admissible
        ):
            return self._plan[len(done)]
        if self._failed_at == len(history):
            return None
        plan = self.server.replan(pddl_state, entity_infos, self.timeout)
        if not plan:
            self._failed_at = len(history)
            return None
        self._plan, self._planned_at = plan, len(history)
        return plan[0]


def _as_move(command: str) -> str:
    """`put X in/on Y` in the older grammar ALFWorld's handcoded expert speaks (`move X to Y`)."""
    if command.startswith("put ") and " in/on " in command:
        obj, _, receptacle = command[len("put "):].partition(" in/on ")
        return f"move {obj} to {receptacle}"
    return command


class HandcodedExpert:
    """ALFWorld's handcoded expert fed every step as `AlfredExpert` feeds it, caught up lazily.

    Its random choices draw from a generator of its own (swapped into `random` while it runs), so
    the same game, seed and actions give the same suggestions.
    """

    def __init__(self, game_file: Path, intro: str, seed: int, fix_put: bool) -> None:
        from alfworld.agents.expert import HandCodedTWAgent

        self.fix_put = fix_put
        self._random_state = random.Random(seed).getstate()
        self._agent = HandCodedTWAgent(max_steps=200)
        self._consumed = 0
        self._suggestion: str | None = "look"
        self.failed = False
        with self._own_random():
            try:
                self._agent.reset(str(game_file))
                self._agent.observe(intro)
            except Exception:  # noqa: BLE001 - a heuristic that cannot start simply has no advice
                self.failed = True

    @contextlib.contextmanager
    def _own_random(self) -> Iterator[None]:
        outside = random.getstate()
        random.setstate(self._random_state)
        try:
            yield
        finally:
            self._random_state = random.getstate()
            random.setstate(outside)

    def next_action(self, states: Sequence[Any], commands: Sequence[str], readable_facts: Any) -> str | None:
        """The suggestion after the last of `commands` (states[i] is the game after commands[i-1])."""
        if self.failed:
            return None
        with self._own_random():
            while self._consumed < len(commands):
                state, command = states[self._consumed + 1], commands[self._consumed]
                self._consumed += 1
                if "facts" not in state:
                    state["facts"] = readable_facts(state)
                try:
                    action = self._agent.act(self._view(state), 0, state["won"], command)
                except Exception:  # noqa: BLE001 - HandCodedAgentFailed/Timeout and its own bugs
                    self.failed = True
                    return None
                self._suggestion = self._admissible(action, state["admissible_commands"])
        return self._suggestion

    def _view(self, state: Any) -> Any:
        """The game state as the expert sees it: with the fix, `put X in/on Y` reads `move X to Y`.

        The expert was written for a grammar whose put command was `move X to Y`: it only starts
        its put subgoal once it finds that command among the admissible ones.
        """
        if not self.fix_put:
            return state
        view = dict(state)
        view["admissible_commands"] = [_as_move(command) for command in state["admissible_commands"]]
        return view

    def _admissible(self, action: str, admissible: Sequence[str]) -> str:
        if action in admissible:
            return action
        if self.fix_put and action.startswith("move ") and " to " in action:
            obj, _, receptacle = action[len("move "):].partition(" to ")
            wanted = f"put {obj} in/on {receptacle}"
            if wanted in admissible:
                return wanted
            for command in admissible:
                if command.startswith(f"put {obj} ") and command.endswith(f" {receptacle}"):
                    return command
        return "look"  # what AlfredExpert plays for an action the game would not accept
