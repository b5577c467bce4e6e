"""The real environment as a world model: a reference to check a pipeline against (`SimEnv` over it
must match the recording); the side-by-side view compares with the recorded episode, not with this.

A real environment cannot un-step, so `predict` steps it and `commit` keeps that step; a second
`predict` without a commit in between (another action tried from the same point) first resets
the environment and replays the committed actions. Deterministic environments (ALFWorld,
TextWorld, BFCL's tools) come back to the same point that way.
"""

from __future__ import annotations

from typing import Any

from worldsmith.envs.base import Env, InvalidActionError
from worldsmith.sim.base import Audit, Prediction, WorldModelBase, action_line
from worldsmith.traces.model import Action

__all__ = ["RealEnvOracle"]


class RealEnvOracle(WorldModelBase):
    """Plays `task` in a real `env`: resets it and replays the prefix's actions at `start`."""

    name = "oracle"

    def __init__(self, env: Env, task: str | None = None, *, seed: int | None = None) -> None:
        super().__init__()
        self.env = env
        self.task_id = task
        self.seed = seed
        self.opening = ""  # what the real environment showed at reset
        self.prefix_divergence: int | None = None  # first prefix turn whose real observation differs (-1: opening)
        self._dirty = False  # the environment is one uncommitted step ahead of the history
        self._info: dict[str, Any] = {}

    def _replay(self) -> None:
        observation, self._info = self.env.reset(self.task_id, seed=self.seed)
        self.opening = observation.text
        self.prefix_divergence = -1 if self.initial_observation and self.initial_observation != self.opening else None
        for index, item in enumerate(self.history):
            result = self.env.step(item.action)
            self._info = result.info
            if self.prefix_divergence is None and result.observation.text != item.observation:
                self.prefix_divergence = index
        self._dirty = False

    def _on_start(self) -> None:
        self._replay()

    def _predict(self, action: Action) -> Prediction:
        notes = []
        if self._dirty:
            self._replay()
            notes.append("reset and replayed the committed actions (the last prediction was not committed)")
        if self.prefix_divergence is not None:
            notes.append(f"the real environment diverged from the prefix at turn {self.prefix_divergence}")
        call = {"env": self.env.name, "task": self.task_id, "action": action_line(action)}
        try:
            result = self.env.step(action)
        except InvalidActionError as error:
            return Prediction(observation="", outcome="failure:invalid_action", audit=Audit(
                route="oracle", source="oracle", tool_calls=[{**call, "error": str(error)}],
                notes=[*notes, str(error)]))
        self._dirty = True
        won = result.info.get("won")
        audit = Audit(route="oracle", source="oracle", tool_calls=[call], notes=notes)
        return Prediction(observation=result.observation.text, reward=float(result.reward),
                          done=bool(result.terminated or result.truncated),
                          outcome="success" if won is True else "unknown", audit=audit)

    def _on_commit(self, action: Action, prediction: Prediction) -> None:
        self._dirty = False

    def admissible_actions(self) -> list[str] | None:
        """The real environment's valid actions where it is now (after the last step, committed or not)."""
        return self.env.admissible_actions()

    def close(self) -> None:
        self.env.close()
