"""Policies: what chooses the next action. The LLM layer and EnvACE implement the same protocol.

A policy sees the environment it acts in (an expert asks it for the gold action; a random
policy asks for the admissible ones) plus the latest observation and info, and returns an
action, or None to stop the episode.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from worldsmith.envs.base import Env, as_action
from worldsmith.traces.model import Action, Observation

__all__ = ["ExpertPolicy", "Policy", "RandomPolicy", "ReplayPolicy", "make_policy", "POLICIES"]


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        """A new episode started in `env` with this opening observation."""
        ...

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        """The next action given the latest observation; None ends the episode."""
        ...


class ExpertPolicy:
    """The environment's own expert: gold path, walkthrough, ground-truth calls, planner."""

    name = "expert"

    def __init__(self) -> None:
        self._env: Env | None = None

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._env = env

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None:
            raise RuntimeError("reset() the policy before act()")
        return self._env.expert_action()


class RandomPolicy:
    """Uniform over the admissible actions (environments without them cannot use it)."""

    name = "random"

    def __init__(self, seed: int | None = None) -> None:
        self._rng = random.Random(seed)
        self._env: Env | None = None

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._env = env

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._env is None:
            raise RuntimeError("reset() the policy before act()")
        actions = self._env.admissible_actions()
        if actions is None:
            raise ValueError(f"environment {self._env.name!r} lists no admissible actions: the random policy needs them")
        return as_action(self._rng.choice(actions)) if actions else None


class ReplayPolicy:
    """Plays a fixed list of actions in order, then stops."""

    name = "replay"

    def __init__(self, actions: Sequence[Action | str | dict[str, Any]]) -> None:
        self.actions = [as_action(action) for action in actions]
        self._position = 0

    def reset(self, env: Env, observation: Observation, info: dict[str, Any]) -> None:
        self._position = 0

    def act(self, observation: Observation, info: dict[str, Any]) -> Action | None:
        if self._position >= len(self.actions):
            return None
        action = self.actions[self._position]
        self._position += 1
        return action


POLICIES = ("expert", "random", "replay", "llm")


def make_policy(
    name: str,
    *,
    seed: int | None = None,
    actions: Sequence[Action | str | dict[str, Any]] | None = None,
    model: str | None = None,
    workspace_root: str | None = None,
) -> Policy:
    """A policy by name; `llm` needs `model` (a spec) and logs its calls in `workspace_root`'s call log."""
    if name == "expert":
        return ExpertPolicy()
    if name == "random":
        return RandomPolicy(seed)
    if name == "replay":
        if actions is None:
            raise ValueError("the replay policy needs a list of actions")
        return ReplayPolicy(actions)
    if name == "llm":
        if not model:
            raise ValueError("the llm policy needs a model spec (e.g. tiny:data_samples/models/tiny)")
        from worldsmith.envs.llm_policy import LLMPolicy
        from worldsmith.llm import open_llm

        return LLMPolicy(open_llm(model, workspace_root, component="policy"), seed=seed)
    raise ValueError(f"unknown policy {name!r} (choose from {', '.join(POLICIES)})")
