"""The one protocol every real environment (and every simulator wrapped as one) speaks.

Shaped like Gymnasium's `Env` so policies, recorders and replays work on any of them:
`reset(task) -> (Observation, info)`, `step(action) -> Step(observation, reward, terminated,
truncated, info)`. Observations are the trace model's `Observation` (verbatim text), actions the
trace model's `Action` (a plain string is accepted and parsed), so what an environment returns
is exactly what a recorded episode stores.

Info keys with a shared meaning (adapters add their own):
- `task`: the instruction text (at reset);
- `won`: the task is solved (the recorder's `success`); `score`: the environment's own score;
- `context`: events seen after this step and before the next action, as
  `[{"role": ..., "content": ..., "name": ...}]` (e.g. the next user message in BFCL);
- `record`: `False` for a step that only hands over to the user and is not a tool turn.
"""

from __future__ import annotations

import warnings
from typing import Any, NamedTuple, Protocol, runtime_checkable

from worldsmith.traces.actions import action_from_text, action_line
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError, NotFoundError, UnavailableError, WorldsmithError

__all__ = [
    "Env",
    "EnvBase",
    "EnvError",
    "EnvUnavailableError",
    "InvalidActionError",
    "Step",
    "TaskLoadError",
    "UnknownTaskError",
    "action_text",
    "as_action",
]


class EnvError(WorldsmithError, RuntimeError):
    """An environment failed (crashed, hung, or was used wrongly)."""


class EnvUnavailableError(UnavailableError, EnvError):
    """The environment cannot start here: a package or program (e.g. Java) is missing."""


class UnknownTaskError(NotFoundError, EnvError):
    """The task id names no task of this environment."""


class TaskLoadError(EnvError):
    """The task exists but the environment cannot load it (e.g. a broken ALFWorld game file)."""


class InvalidActionError(BadInputError, EnvError):
    """The action cannot be sent to this environment at all (wrong shape, not merely useless)."""


class Step(NamedTuple):
    """What `Env.step` returns; unpacks like Gymnasium's 5-tuple."""

    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


@runtime_checkable
class Env(Protocol):
    """A real or simulated environment an agent acts in."""

    name: str

    def tasks(self) -> list[str]:
        """Task ids this environment knows (may be long; may be empty for open-ended ones)."""
        ...

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        """Start an episode of `task` (the first task when None); returns the opening observation."""
        ...

    def step(self, action: Action | str) -> Step:
        """Act once; an unhelpful action gives the environment's own answer, not an exception."""
        ...

    def admissible_actions(self) -> list[str] | None:
        """Actions valid now, as text, where the environment knows them; else None."""
        ...

    def expert_action(self) -> Action | None:
        """The expert's (gold, walkthrough, ground-truth) next action now; None when it has none left."""
        ...

    def state(self) -> dict[str, Any] | None:
        """A JSON snapshot of the true state (evaluation only); None where the environment hides it."""
        ...

    def close(self) -> None:
        """Release processes and files; safe to call twice."""
        ...


def as_action(action: Action | str | dict[str, Any]) -> Action:
    """The trace model's `Action` for a policy's output (text commands are parsed, raw text kept).

    A dict is an action object as stored (`{"name": ..., "arguments": ...}`), e.g. from an action file.
    """
    if isinstance(action, Action):
        return action
    if isinstance(action, str):
        return action_from_text(action)
    if isinstance(action, dict) and isinstance(action.get("name"), str):
        return Action.model_validate(action)
    raise InvalidActionError(f"an action must be an Action or text, not {type(action).__name__}")


def action_text(action: Action | str) -> str:
    """Deprecated: `action_line(action, command=True)` (`worldsmith.traces.action_line`), the one action->text
    function; kept so environment plugins written against it go on working."""
    warnings.warn("worldsmith.envs.action_text is deprecated: use worldsmith.traces.action_line(action, "
                  "command=True)", DeprecationWarning, stacklevel=2)
    return action_line(action, command=True)


class EnvBase:
    """Defaults for the optional parts of `Env`; adapters subclass it."""

    name = "env"

    def tasks(self) -> list[str]:
        return []

    def admissible_actions(self) -> list[str] | None:
        return None

    def expert_action(self) -> Action | None:
        raise NotImplementedError(f"{self.name} has no expert")

    def state(self) -> dict[str, Any] | None:
        return None

    def close(self) -> None:
        return None

    def __enter__(self) -> EnvBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
