"""The simulator as an environment: any `WorldModel` behind the `Env` protocol.

Every policy, recorder and replay that runs in a real environment runs unchanged in `SimEnv`,
and the actions it takes there (`SimEnv.actions`) can be replayed in the real environment
(`worldsmith.envs.replay.replay(real_env, task, sim.actions)`), so a plan made in simulation
can be checked for real. `GymnasiumSimEnv` puts a `SimEnv` behind Gymnasium's API (text in,
text out) for training code written against Gymnasium.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

from worldsmith.envs.base import EnvBase, Step, UnknownTaskError, as_action
from worldsmith.sim.base import WorldModel, episode_prefix
from worldsmith.traces.model import Action, Episode, Observation
from worldsmith.worldbook.model import Worldbook

__all__ = ["GYMNASIUM_AVAILABLE", "GymnasiumSimEnv", "SimEnv"]


class SimEnv(EnvBase):
    """`Env` over a world model: `reset` starts it on a task's opening, each `step` is predict + commit.

    `tasks` maps task ids to opening observations, or is a list of episodes (task id = the
    episode's `task_id`, else its id; opening, task text and env id from the episode; their
    recorded actions are the `expert_action`s). `book` supplies admissible actions (its action
    schema's examples and evidence commands) when the world model has none of its own.
    """

    def __init__(self, world_model: WorldModel, *, tasks: Mapping[str, str] | Sequence[Episode],
                 env_id: str | None = None, book: Worldbook | None = None, max_steps: int = 50) -> None:
        self.world_model = world_model
        self.book = book
        self.env_id = env_id or (book.env_id if book is not None else None)
        self.name = f"sim:{self.env_id or world_model.name}"
        self.max_steps = max_steps
        self._episodes: dict[str, Episode] = {}
        if isinstance(tasks, Mapping):
            for task_id, opening in tasks.items():
                self._episodes[task_id] = episode_prefix(opening, env_id=self.env_id, episode_id=task_id)
        else:
            for episode in tasks:
                self._episodes[episode.task_id or episode.id] = episode
        self._task: str | None = None
        self._steps = 0
        self._actions: list[Action] = []
        self._done = False

    # -- Env protocol

    def tasks(self) -> list[str]:
        return list(self._episodes)

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        if not self._episodes:
            raise UnknownTaskError(f"{self.name} has no tasks")
        task = task if task is not None else next(iter(self._episodes))
        if task not in self._episodes:
            raise UnknownTaskError(f"{self.name} has no task {task!r} ({len(self._episodes)} tasks)")
        recorded = self._episodes[task]
        opening = recorded.initial_observation.text if recorded.initial_observation else ""
        prefix = episode_prefix(opening, task=recorded.task, env_id=recorded.env_id or self.env_id, episode_id=task)
        self.world_model.start(prefix, None)
        self._task, self._steps, self._actions, self._done = task, 0, [], False
        info: dict[str, Any] = {"task": recorded.task or "", "task_id": task}
        admissible = self.admissible_actions()
        if admissible is not None:
            info["admissible_actions"] = admissible
        return Observation(text=opening), info

    def step(self, action: Action | str) -> Step:
        if self._task is None:
            raise RuntimeError(f"{self.name}: reset() before step()")
        parsed = as_action(action)
        prediction = self.world_model.predict(parsed)
        self.world_model.commit()
        self._steps += 1
        self._actions.append(parsed)
        terminated = bool(prediction.done)
        truncated = not terminated and self._steps >= self.max_steps
        self._done = terminated or truncated
        info: dict[str, Any] = {"outcome": prediction.outcome, "route": prediction.audit.route,
                                "audit": prediction.audit.model_dump(mode="json"),
                                "effects": [effect.model_dump(mode="json") for effect in prediction.effects]}
        if prediction.done:
            info["won"] = prediction.reward > 0
        admissible = self.admissible_actions()
        if admissible is not None:
            info["admissible_actions"] = admissible
        return Step(Observation(text=prediction.observation), float(prediction.reward), terminated, truncated, info)

    def admissible_actions(self) -> list[str] | None:
        own = getattr(self.world_model, "admissible_actions", None)
        if callable(own):
            return own()
        if self.book is None:
            return None
        commands = [example for spec in self.book.action_schema.actions for example in spec.examples]
        commands += [item.action_text for item in self.book.evidence]
        return sorted(set(commands)) or None

    def expert_action(self) -> Action | None:
        """The recorded episode's next action (for episode tasks); None past its end."""
        if self._task is None:
            return None
        turns = self._episodes[self._task].turns
        return turns[self._steps].action if self._steps < len(turns) else None

    def state(self) -> dict[str, Any] | None:
        state = getattr(self.world_model, "state", None)
        return dict(state) if isinstance(state, dict) else None

    def close(self) -> None:
        closer = getattr(self.world_model, "close", None)
        if callable(closer):
            closer()

    # -- simulation

    @property
    def actions(self) -> list[Action]:
        """The actions taken since the last reset: what to replay in the real environment."""
        return list(self._actions)

    @property
    def task(self) -> str | None:
        return self._task


try:  # Gymnasium is optional: the wrapper subclasses its Env when it is installed.
    import gymnasium as _gymnasium

    _gym: ModuleType | None = _gymnasium
    GYMNASIUM_AVAILABLE = True
    _GymBase: type = _gymnasium.Env
except ImportError:  # pragma: no cover - depends on the install
    _gym = None
    GYMNASIUM_AVAILABLE = False
    _GymBase = object


_CHARSET = "".join(chr(code) for code in range(32, 127)) + "\n\t\r"


class GymnasiumSimEnv(_GymBase):
    """Gymnasium's API over a `SimEnv`: observations and actions are text (`gymnasium.spaces.Text`).

    `reset(seed=..., options={"task": ID})`; `step(text)` returns Gymnasium's 5-tuple with the
    observation text. It passes `gymnasium.utils.env_checker.check_env`, hence three choices:
    observations may be empty (a simulator can answer nothing); characters outside `charset`
    become "?" so every observation lies in the space (the exact text is then in
    `info["observation_text"]`); and each `info` is a fresh copy without the audit's wall-clock
    `latency_s`, so one seed and action give equal infos. Without Gymnasium installed it keeps the
    same methods (and no spaces).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, env: SimEnv, *, task: str | None = None, max_length: int = 20_000,
                 charset: str = _CHARSET) -> None:
        self.env = env
        self.task = task
        self.max_length = max_length
        self.charset = frozenset(charset)
        if _gym is not None:
            self.observation_space = _gym.spaces.Text(max_length=max_length, min_length=0, charset=charset)
            self.action_space = _gym.spaces.Text(max_length=max_length, charset=charset)

    def _text(self, observation: Observation, info: dict[str, Any]) -> str:
        text = observation.text[: self.max_length]
        if any(char not in self.charset for char in text):
            info["observation_text"] = observation.text
            text = "".join(char if char in self.charset else "?" for char in text)
        return text

    @staticmethod
    def _info(info: Mapping[str, Any]) -> dict[str, Any]:
        """A copy sharing nothing with earlier infos, without timings (they differ between equal steps)."""
        fresh = copy.deepcopy(dict(info))
        audit = fresh.get("audit")
        if isinstance(audit, dict):
            audit.pop("latency_s", None)
        return fresh

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        if _gym is not None:
            super().reset(seed=seed)
        task = (options or {}).get("task", self.task)
        observation, info = self.env.reset(task, seed=seed)
        info = self._info(info)
        return self._text(observation, info), info

    def step(self, action: str | Action) -> tuple[str, float, bool, bool, dict[str, Any]]:
        result = self.env.step(action if isinstance(action, Action) else str(action))
        info = self._info(result.info)
        return self._text(result.observation, info), float(result.reward), result.terminated, result.truncated, info

    def close(self) -> None:
        self.env.close()
