"""Replay an action sequence in a real environment (world-to-real checks, reproducing episodes).

`replay()` plays a list of actions on one task and reports every step; `replay_episode()` replays
a recorded episode's actions and compares each observation with the recorded one, so a
researcher sees whether the recording is reproducible and where it first diverges.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson

from worldsmith.envs.base import Env, as_action
from worldsmith.envs.recorder import HANDOVER_PREFIX
from worldsmith.envs.registry import spec
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Action, Episode
from worldsmith.util.errors import BadInputError
from worldsmith.util.paths import read_user_text
from worldsmith.workspace.layout import env_family

__all__ = ["ReplayResult", "ReplayStep", "load_actions", "replay", "replay_episode"]


@dataclass
class ReplayStep:
    index: int
    action: str
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    recorded: str | None = None  # the recorded observation, when replaying an episode
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def matches(self) -> bool | None:
        return None if self.recorded is None else self.recorded == self.observation


@dataclass
class ReplayResult:
    env: str
    task: str
    initial_observation: str
    steps: list[ReplayStep]
    reward: float
    success: bool | None
    stopped_early: bool  # the environment ended the episode before the actions ran out
    recorded_initial: str | None = None

    @property
    def compared(self) -> bool:
        return self.recorded_initial is not None

    @property
    def first_divergence(self) -> int | None:
        """Index of the first step whose observation differs from the recording (-1: the opening)."""
        if self.recorded_initial is not None and self.recorded_initial != self.initial_observation:
            return -1
        return next((step.index for step in self.steps if step.matches is False), None)

    @property
    def reproduced(self) -> bool | None:
        if not self.compared:
            return None
        return self.first_divergence is None and not self.stopped_early

    def summary(self) -> dict[str, Any]:
        out = asdict(self)
        out["steps"] = [{**asdict(step), "matches": step.matches} for step in self.steps]
        out.update(first_divergence=self.first_divergence, reproduced=self.reproduced, n_steps=len(self.steps))
        return out


def replay(
    env: Env | str,
    task: str,
    actions: Sequence[Action | str],
    *,
    seed: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    recorded: Sequence[str | None] | None = None,
    recorded_initial: str | None = None,
) -> ReplayResult:
    """Play `actions` on `task`; `env` is an environment or a registry name (built and closed here)."""
    owned = isinstance(env, str)
    environment = spec(env).make(**(env_kwargs or {})) if isinstance(env, str) else env
    try:
        observation, info = environment.reset(task, seed=seed)
        steps: list[ReplayStep] = []
        total, final_info, stopped = 0.0, info, False
        for index, raw in enumerate(actions):
            if steps and (steps[-1].terminated or steps[-1].truncated):
                stopped = True
                break
            action = as_action(raw)
            result = environment.step(action)
            total += float(result.reward)
            final_info = result.info
            steps.append(ReplayStep(
                index=index, action=action_line(action, command=True), observation=result.observation.text,
                reward=float(result.reward), terminated=bool(result.terminated), truncated=bool(result.truncated),
                recorded=recorded[index] if recorded is not None and index < len(recorded) else None,
                info={k: v for k, v in result.info.items() if k in ("won", "score", "context")},
            ))
        won = final_info.get("won")
        return ReplayResult(
            env=environment.name, task=task, initial_observation=observation.text, steps=steps, reward=total,
            success=None if won is None else bool(won), stopped_early=stopped, recorded_initial=recorded_initial,
        )
    finally:
        if owned:
            environment.close()


def replay_episode(episode: Episode, env: Env | None = None, *, env_name: str | None = None) -> ReplayResult:
    """Replay a recorded episode's actions (hand-overs included) and compare observations.

    The environment is rebuilt from `episode.metadata["env"]` (what `worldsmith collect` records)
    unless `env` or `env_name` is given.
    """
    stored_env = episode.metadata.get("env")
    recorded_env: dict[str, Any] = stored_env if isinstance(stored_env, dict) else {}
    name = env_name or recorded_env.get("name") or env_family(episode.env_id)
    if episode.task_id is None:
        raise BadInputError(f"episode {episode.id!r} has no task id: cannot replay it")
    actions: list[Action | str] = []
    recorded: list[str | None] = []
    for turn in [*episode.turns, None]:
        events = turn.context if turn is not None else episode.final_context
        for event in events:  # hand-overs (e.g. BFCL replies to the user) were steps too
            if event.role == "assistant" and event.name and event.name.startswith(HANDOVER_PREFIX):
                actions.append(Action(name=event.name[len(HANDOVER_PREFIX):], arguments={"text": event.content}))
                recorded.append(None)
        if turn is not None:
            actions.append(turn.action)
            recorded.append(turn.observation.text)
    initial = episode.initial_observation.text if episode.initial_observation else None
    seed = episode.metadata.get("seed")
    result = replay(
        env if env is not None else name, episode.task_id, actions, seed=seed if isinstance(seed, int) else None,
        env_kwargs=recorded_env.get("kwargs") if env is None and not env_name else None,
        recorded=recorded, recorded_initial=initial,
    )
    return result


def load_actions(path: Path) -> list[Action | str]:
    """Actions from a file: a JSON list (text or action objects), JSONL, or one text command per line."""
    text = read_user_text(path, "action file")
    stripped = text.strip()
    if not stripped:
        raise BadInputError("no actions", where=str(path))
    if stripped.startswith("["):
        try:
            values = orjson.loads(stripped)
        except orjson.JSONDecodeError as error:
            raise BadInputError(f"not valid JSON: {error}", where=str(path)) from None
        return [_action_value(value, path, index) for index, value in enumerate(values)]
    if stripped.startswith("{"):
        out = []
        for number, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append(_action_value(orjson.loads(line), path, number))
                except orjson.JSONDecodeError as error:
                    raise BadInputError(f"not valid JSON: {error}", where=f"{path}:{number}") from None
        return out
    return [line for line in text.splitlines() if line.strip()]


def _action_value(value: Any, path: Path, where: int) -> Action | str:
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("name"), str):
        return Action(name=value["name"], arguments=value.get("arguments", {}), raw=value.get("raw"))
    raise BadInputError(f"action {where} must be text or an object with a 'name', not {str(value)[:80]!r}",
                        where=str(path))
