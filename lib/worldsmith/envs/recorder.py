"""Run a policy in an environment and record what happened as a trace-model `Episode`.

Every turn carries provenance (`env:<name>`, a pointer `/<task>/steps/<i>`, a fingerprint of
its content) and, where the environment exposes it, a ground-truth state snapshot in
`Turn.state` (evaluation only). An environment that fails mid-episode does not lose the turns
already played: the episode comes back with `metadata["error"]` and `success=False`.
"""

from __future__ import annotations

import re
import time
import traceback
from typing import Any

from worldsmith.envs.base import Env, EnvError, UnknownTaskError, action_text, as_action
from worldsmith.envs.policies import Policy
from worldsmith.traces.model import ContextEvent, Episode, Provenance, SourceRef, Turn, content_digest

__all__ = ["HANDOVER_PREFIX", "episode_id_for", "record_episode"]

# Context-event name of a step recorded as a hand-over (`info["record"] is False`), e.g. "handover:respond".
HANDOVER_PREFIX = "handover:"
# Info keys the recorder consumes instead of storing them on the turn.
_CONTROL_KEYS = ("context", "record", "task", "env_id")


def episode_id_for(env_name: str, task: str, policy: str, seed: int | None) -> str:
    """A stable, readable episode id: the same run always gets the same id."""
    slug = re.sub(r"[^A-Za-z0-9_.:+-]+", "-", task).strip("-")[-80:] or "task"
    return f"{env_name}-{slug}-{policy}-s{seed if seed is not None else 0}"


def _events(info: dict[str, Any]) -> list[ContextEvent]:
    return [ContextEvent(**event) for event in info.get("context") or []]


def _stored_info(info: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in info.items() if key not in _CONTROL_KEYS}


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
    started = time.perf_counter()
    observation, info = env.reset(task, seed=seed)
    policy.reset(env, observation, info)
    source = f"env:{env.name}"
    episode_id = episode_id or episode_id_for(env.name, task, policy.name, seed)
    initial_state = env.state() if record_state else None
    turns: list[Turn] = []
    pending = _events(info)
    final_info = info
    terminated = truncated = False
    error: str | None = None
    total_reward = 0.0
    steps = 0
    last_obs = observation
    try:
        while steps < max_steps:
            action = policy.act(last_obs, final_info)
            if action is None:
                break
            action = as_action(action)
            result = env.step(action)
            steps += 1
            total_reward += float(result.reward)
            last_obs, final_info = result.observation, result.info
            terminated, truncated = bool(result.terminated), bool(result.truncated)
            if result.info.get("record", True) is False:  # a hand-over to the user, not a tool turn
                said = action.arguments.get("text") if isinstance(action.arguments, dict) else None
                pending.append(ContextEvent(
                    role="assistant", content=said if isinstance(said, str) else action_text(action),
                    name=HANDOVER_PREFIX + action.name,
                ))
                pending.extend(_events(result.info))
            else:
                index = len(turns)
                stored = _stored_info(result.info)
                turn = Turn(
                    index=index,
                    action=action,
                    observation=result.observation,
                    reward=float(result.reward),
                    done=terminated,
                    info=stored,
                    context=pending,
                    provenance=Provenance(
                        source=source,
                        pointer=f"/{task}/steps/{steps - 1}",
                        content_hash=content_digest(
                            [action.name, action.arguments, result.observation.text]
                        )[:16],
                    ),
                    state=env.state() if record_state else None,
                )
                turns.append(turn)
                pending = _events(result.info)
            if terminated or truncated:
                break
        else:
            truncated = True
    except (UnknownTaskError, KeyboardInterrupt):
        raise
    except Exception as failure:  # noqa: BLE001 - a crashing environment must not lose the episode
        kind = "environment error" if isinstance(failure, EnvError) else type(failure).__name__
        error = f"{kind}: {failure}"
        tail = traceback.format_exception(failure)[-3:]
        final_info = {**final_info, "traceback": "".join(tail)[-2000:]}
    won = final_info.get("won")
    score = final_info.get("score")
    metadata: dict[str, Any] = {
        "policy": policy.name,
        "seed": seed,
        "steps": steps,
        "max_steps": max_steps,
        "terminated": terminated,
        "truncated": truncated,
        "seconds": round(time.perf_counter() - started, 3),
        "env": {"name": env.name, "kwargs": env_kwargs or {}},
    }
    if score is not None:
        metadata["score"] = score
    if error is not None:
        metadata["error"] = error
        metadata["traceback"] = final_info.get("traceback")
    return Episode(
        id=episode_id,
        env_id=str(info.get("env_id") or env.name),
        task=info.get("task"),
        task_id=task,
        initial_observation=observation,
        initial_info=_stored_info(info),
        turns=turns,
        final_context=pending,
        reward=float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else total_reward,
        success=bool(won) if won is not None and error is None else (False if error else None),
        family=f"{env.name}:{task}",
        metadata=metadata,
        source=SourceRef(format="collect", path=source, pointer=f"/{task}"),
        initial_state=initial_state,
    )
