"""Record what happens in an environment as a trace-model `Episode`.

`EpisodeRecorder` records step by step (a person playing in the workbench drives it one action
at a time); `record_episode` runs a policy through it. Every turn carries provenance
(`env:<name>`, a pointer `/<task>/steps/<i>`, a fingerprint of its content) and, where the
environment exposes it, a ground-truth state snapshot in `Turn.state` (evaluation only). An
environment that fails mid-episode does not lose the turns already played: the episode comes
back with `metadata["error"]` and `success=False`.
"""

from __future__ import annotations

import hashlib
import re
import traceback
from typing import Any

from worldsmith.envs.base import Env, EnvError, Step, UnknownTaskError, as_action
from worldsmith.envs.policies import Policy
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import (
    Action,
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    content_digest,
)

__all__ = ["HANDOVER_PREFIX", "EpisodeRecorder", "episode_id_for", "record_episode"]

# Context-event name of a step recorded as a hand-over (`info["record"] is False`), e.g. "handover:respond".
HANDOVER_PREFIX = "handover:"
# Info keys the recorder consumes instead of storing them on the turn.
_CONTROL_KEYS = ("context", "record", "task", "env_id")


def episode_id_for(env_name: str, task: str, policy: str, seed: int | None) -> str:
    """A stable, readable episode id: the same run always gets the same id."""
    slug = re.sub(r"[^A-Za-z0-9_.:+-]+", "-", task).strip("-") or "task"
    if len(slug) > 120:  # keep it readable, keep it unique
        slug = f"{slug[:100]}-{hashlib.md5(task.encode(), usedforsecurity=False).hexdigest()[:8]}"
    return f"{env_name}-{slug}-{policy}-s{seed if seed is not None else 0}"


def _events(info: dict[str, Any]) -> list[ContextEvent]:
    return [ContextEvent(**event) for event in info.get("context") or []]


def _stored_info(info: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items() if key not in _CONTROL_KEYS}


class EpisodeRecorder:
    """Resets `env` on `task`, then records each `step()` until `episode()` is asked for."""

    def __init__(
        self,
        env: Env,
        task: str,
        *,
        policy: str,
        seed: int | None = None,
        episode_id: str | None = None,
        record_state: bool = True,
        env_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.env, self.task, self.policy, self.seed = env, task, policy, seed
        self.record_state = record_state
        self.env_kwargs = env_kwargs or {}
        self.episode_id = episode_id or episode_id_for(env.name, task, policy, seed)
        self.initial_observation, self.initial_info = env.reset(task, seed=seed)
        self.initial_state = env.state() if record_state else None
        self.turns: list[Turn] = []
        self.pending = _events(self.initial_info)
        self.pending_info: list[dict[str, Any]] = []  # what hand-over steps reported (e.g. new tools)
        self.last_observation: Observation = self.initial_observation
        self.last_info: dict[str, Any] = self.initial_info
        self.steps = 0
        self.total_reward = 0.0
        self.terminated = self.truncated = False
        self.error: str | None = None
        self.traceback: str | None = None

    @property
    def finished(self) -> bool:
        return self.terminated or self.truncated or self.error is not None

    def step(self, action: Action | str) -> Step:
        """Send `action` to the environment and record the result (errors propagate to the caller)."""
        action = as_action(action)
        result = self.env.step(action)
        self.steps += 1
        self.total_reward += float(result.reward)
        self.last_observation, self.last_info = result.observation, result.info
        self.terminated, self.truncated = bool(result.terminated), bool(result.truncated)
        if result.info.get("record", True) is False:  # a hand-over to the user, not a tool turn
            said = action.arguments.get("text") if isinstance(action.arguments, dict) else None
            self.pending.append(ContextEvent(
                role="assistant", content=said if isinstance(said, str) else action_line(action, command=True),
                name=HANDOVER_PREFIX + action.name,
            ))
            self.pending.extend(_events(result.info))
            extra = _stored_info(result.info)
            if extra:
                self.pending_info.append(extra)
            return result
        info = _stored_info(result.info)
        if self.pending_info:  # the hand-overs since the last turn, kept on this turn
            info["handover"], self.pending_info = self.pending_info, []
        self.turns.append(Turn(
            index=len(self.turns),
            action=action,
            observation=result.observation,
            reward=float(result.reward),
            done=self.terminated,
            info=info,
            context=self.pending,
            provenance=Provenance(
                source=f"env:{self.env.name}",
                pointer=f"/{self.task}/steps/{self.steps - 1}",
                content_hash=content_digest([action.name, action.arguments, result.observation.text])[:16],
            ),
            state=self.env.state() if self.record_state else None,
        ))
        self.pending = _events(result.info)
        return result

    def fail(self, failure: BaseException) -> None:
        """Record that the environment broke; the turns so far are kept."""
        kind = "environment error" if isinstance(failure, EnvError) else type(failure).__name__
        self.error = f"{kind}: {failure}"
        self.traceback = "".join(traceback.format_exception(failure)[-3:])[-2000:]

    def episode(self, *, max_steps: int | None = None, **metadata: Any) -> Episode:
        """The episode recorded so far; extra keyword arguments go into its metadata."""
        won, score = self.last_info.get("won"), self.last_info.get("score")
        meta: dict[str, Any] = {
            "policy": self.policy, "seed": self.seed, "steps": self.steps, "max_steps": max_steps,
            "terminated": self.terminated, "truncated": self.truncated,
            "env": {"name": self.env.name, "kwargs": self.env_kwargs}, **metadata,
        }
        if score is not None:
            meta["score"] = score
        if self.pending_info:  # hand-overs after the last turn (e.g. BFCL's final verdict)
            meta["final_handover"] = self.pending_info
        if self.error is not None:
            meta["error"], meta["traceback"] = self.error, self.traceback
        reward = float(score) if isinstance(score, int | float) and not isinstance(score, bool) else self.total_reward
        return Episode(
            id=self.episode_id,
            env_id=str(self.initial_info.get("env_id") or self.env.name),
            task=self.initial_info.get("task"),
            task_id=self.task,
            initial_observation=self.initial_observation,
            initial_info=_stored_info(self.initial_info),
            turns=list(self.turns),
            final_context=list(self.pending),
            reward=reward,
            success=False if self.error is not None else (None if won is None else bool(won)),
            family=f"{self.env.name}:{self.task}",
            metadata=meta,
            source=SourceRef(format="collect", path=f"env:{self.env.name}", pointer=f"/{self.task}"),
            initial_state=self.initial_state,
        )


def record_episode(
    env: Env,
    policy: Policy,
    task: str,
    *,
    max_steps: int = 50,
    seed: int | None = None,
    episode_id: str | None = None,
    record_state: bool = True,
    env_kwargs: dict[str, Any] | None = None,
) -> Episode:
    """Play one episode of `task` with `policy` (at most `max_steps` actions) and record it.

    Raises `UnknownTaskError` / `TaskLoadError` when the task cannot start: there is no episode
    to keep. Errors after the start end the episode early and are recorded in its metadata.
    """
    recorder = EpisodeRecorder(env, task, policy=policy.name, seed=seed, episode_id=episode_id,
                               record_state=record_state, env_kwargs=env_kwargs)
    policy.reset(env, recorder.initial_observation, recorder.initial_info)
    try:
        while recorder.steps < max_steps and not recorder.finished:
            action = policy.act(recorder.last_observation, recorder.last_info)
            if action is None:
                break
            recorder.step(action)
        else:
            if not recorder.finished:
                recorder.truncated = True
    except (UnknownTaskError, KeyboardInterrupt):
        raise
    except Exception as failure:  # noqa: BLE001 - a crashing environment must not lose the episode
        recorder.fail(failure)
    return recorder.episode(max_steps=max_steps)
