"""An environment checker every adapter passes (like `gymnasium.utils.env_checker`).

It exercises the protocol on one task: types of what `reset` and `step` return, that an
unhelpful action is answered rather than raised, that admissible actions are text, that the
state snapshot is JSON, that `close()` may be called twice, and, for a deterministic
environment, that two resets of the same task open identically.
"""

from __future__ import annotations

import math
from typing import Any

import orjson

from worldsmith.envs.base import Env, InvalidActionError, Step
from worldsmith.traces.model import Action, Observation

__all__ = ["EnvCheckError", "check_env"]


class EnvCheckError(AssertionError):
    """The environment breaks the `Env` protocol; the message lists every problem found."""


def _check_info(info: Any, where: str, problems: list[str]) -> None:
    if not isinstance(info, dict):
        problems.append(f"{where}: info is a {type(info).__name__}, not a dict")
        return
    try:
        orjson.dumps(info, option=orjson.OPT_NON_STR_KEYS)
    except TypeError as error:
        problems.append(f"{where}: info is not JSON-serialisable ({error})")


def _check_step(result: Any, where: str, problems: list[str]) -> None:
    if not isinstance(result, tuple) or len(result) != 5:
        problems.append(f"{where}: step() must return (observation, reward, terminated, truncated, info)")
        return
    observation, reward, terminated, truncated, info = result
    if not isinstance(result, Step):
        problems.append(f"{where}: step() should return worldsmith.envs.Step")
    if not isinstance(observation, Observation):
        problems.append(f"{where}: observation is a {type(observation).__name__}, not an Observation")
    if not isinstance(reward, (int, float)) or isinstance(reward, bool) or not math.isfinite(float(reward)):
        problems.append(f"{where}: reward {reward!r} is not a finite number")
    for flag, value in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(value, bool):
            problems.append(f"{where}: {flag} is a {type(value).__name__}, not a bool")
    _check_info(info, where, problems)


def check_env(env: Env, task: str | None = None, *, invalid_action: Action | str = "xyzzy plugh") -> None:
    """Raise `EnvCheckError` listing every way `env` breaks the protocol."""
    problems: list[str] = []
    observation, info = env.reset(task, seed=0)
    if not isinstance(observation, Observation):
        problems.append(f"reset(): observation is a {type(observation).__name__}, not an Observation")
    _check_info(info, "reset()", problems)
    admissible = env.admissible_actions()
    if admissible is not None and not (isinstance(admissible, list) and all(isinstance(a, str) for a in admissible)):
        problems.append("admissible_actions() must return a list of str or None")
    state = env.state()
    if state is not None:
        try:
            orjson.dumps(state, option=orjson.OPT_NON_STR_KEYS)
        except TypeError as error:
            problems.append(f"state() is not JSON-serialisable ({error})")
    try:
        _check_step(env.step(invalid_action), "step(invalid action)", problems)
    except InvalidActionError:
        pass  # a clear refusal is fine too
    except Exception as error:  # noqa: BLE001 - reported, not raised
        problems.append(f"step(invalid action) raised {type(error).__name__}: {error}")
    try:
        expert = env.expert_action()
    except NotImplementedError:
        expert = None
    if expert is not None:
        if not isinstance(expert, Action):
            problems.append(f"expert_action() returned a {type(expert).__name__}, not an Action")
        else:
            _check_step(env.step(expert), "step(expert action)", problems)
    again, _ = env.reset(task, seed=0)
    second, _ = env.reset(task, seed=0)
    from worldsmith.envs.registry import registry

    known = registry().get(env.name)
    if (known is None or known.deterministic) and again.text != second.text:
        problems.append("two resets of the same task with the same seed opened differently")
    if again.text != observation.text and (known is None or known.deterministic):
        problems.append("reset() after playing did not reopen the task as the first reset did")
    env.close()
    try:
        env.close()
    except Exception as error:  # noqa: BLE001
        problems.append(f"a second close() raised {type(error).__name__}: {error}")
    if problems:
        raise EnvCheckError(f"{env.name}: " + "; ".join(problems))
