"""Per-token GRPO advantages from rewards alone: no model, no tensors, so the credit rules are testable on their own.

`rollout_advantages` normalises the rewards of each task's G rollouts per role (`grpo.group_advantages`), and with
transition credit each rehearsal against the group's rehearsals of the same transition (`grpo.keyed_advantages`).
`token_advantages` broadcasts those to the target tokens of the packed rollout streams: an act token gets its
rollout's act advantage, a rehearse token its rollout's (or its rehearsal's) rehearse advantage; tokens of a role
not trained, or without an advantage (no baseline), are left out of the loss. Tokens are grouped into sequences
(the unit GRPO averages over): a rollout's act tokens, and its rehearse tokens (one sequence per rehearsal with
transition credit).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from worldsmith.envace.data import ROLE_ACT, ROLE_REHEARSE
from worldsmith.envace.grpo import group_advantages, keyed_advantages
from worldsmith.envace.rollouts import RolloutGroup

__all__ = ["TRAINED_ROLES", "RolloutAdvantages", "TokenAdvantages", "rollout_advantages", "token_advantages",
           "transition_keys"]

TRAINED_ROLES: dict[str, tuple[int, ...]] = {
    "both": (ROLE_ACT, ROLE_REHEARSE), "act": (ROLE_ACT,), "rehearse": (ROLE_REHEARSE,)}

TransitionKey = tuple[int, tuple[str, ...]]


@dataclass(frozen=True)
class RolloutAdvantages:
    """Per rollout (in group order): its act and rehearse advantages and, with transition credit, one rehearse
    advantage per rehearsal (its k-th rehearsal at index k - 1)."""

    act: list[float | None]
    rehearse: list[float | None]
    transitions: list[list[float | None]] | None = None

    def act_values(self) -> list[float]:
        return [value for value in self.act if value is not None]

    def rehearse_values(self) -> list[float]:
        """The rehearse advantages the loss uses: per rehearsal with transition credit, else per rollout."""
        if self.transitions is not None:
            return [value for per_rehearsal in self.transitions for value in per_rehearsal if value is not None]
        return [value for value in self.rehearse if value is not None]


@dataclass(frozen=True)
class TokenAdvantages:
    """The target tokens that enter the loss: their index among the batch's target tokens, their advantage and
    their sequence (numbered 0..S-1 in (rollout, segment) order)."""

    keep: list[int]
    values: list[float]
    sequences: list[int]


def transition_keys(groups: Sequence[RolloutGroup]) -> list[list[tuple[TransitionKey, float | None]]]:
    """Per rollout, its rehearsals in order as (transition key, fidelity); the key is the task and the calls up to
    the rehearsed one (`grpo.rehearse_credit: transition`)."""
    out = []
    for number, group in enumerate(groups):
        for item in group.rollouts:
            actions = tuple(step.action for step in item.steps)
            out.append([((number, actions[: k + 1]), reward)
                        for k, (step, reward) in enumerate(zip(item.steps, item.rehearse_rewards, strict=True))
                        if step.rehearsed is not None])
    return out


def rollout_advantages(
    groups: Sequence[RolloutGroup], *, dr_grpo: bool = False, credit: Literal["rollout", "transition"] = "rollout"
) -> RolloutAdvantages:
    """Advantages of scored rollouts: each role against its own baseline within the task's group."""
    act: list[float | None] = []
    rehearse: list[float | None] = []
    for group in groups:
        act += group_advantages([item.task_reward for item in group.rollouts], dr_grpo=dr_grpo)
        rehearse += group_advantages([item.rehearse_reward for item in group.rollouts], dr_grpo=dr_grpo)
    transitions = keyed_advantages(transition_keys(groups), dr_grpo=dr_grpo) if credit == "transition" else None
    return RolloutAdvantages(act, rehearse, transitions)


def token_advantages(
    rows: Sequence[int],
    roles: Sequence[int],
    segments: Sequence[int],
    advantages: RolloutAdvantages,
    trained: Collection[int] = TRAINED_ROLES["both"],
) -> TokenAdvantages:
    """Broadcast rollout advantages to target tokens, given each token's rollout (`rows`), role and segment (0 for
    act tokens, k for the rollout's k-th rehearsal)."""
    keep: list[int] = []
    values: list[float] = []
    keys: list[tuple[int, int]] = []
    for index, (row, role, segment) in enumerate(zip(rows, roles, segments, strict=True)):
        if role == ROLE_REHEARSE and advantages.transitions is not None:
            advantage = advantages.transitions[row][segment - 1]
            key = (row, segment)  # each rehearsal is its own sequence
        else:
            advantage = advantages.act[row] if role == ROLE_ACT else advantages.rehearse[row]
            key = (row, -1 if role == ROLE_ACT else 0)
        if advantage is None or role not in trained:
            continue
        keep.append(index)
        values.append(advantage)
        keys.append(key)
    numbers = {key: position for position, key in enumerate(sorted(set(keys)))}
    return TokenAdvantages(keep, values, [numbers[key] for key in keys])
