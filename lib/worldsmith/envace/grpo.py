"""Role-wise GRPO: advantages per (task, role) group and the clipped policy loss.

One set of weights plays both roles, but the roles are rewarded for different things (the act
role for task success, the rehearse role for answers that match the real environment), so each
role gets its own baseline: rewards are normalised within the G rollouts of a task *per role*.
Dr.GRPO drops the std normalisation and replaces per-sequence token means with token sums over
a constant, removing GRPO's length and difficulty biases.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["GRPOTerms", "group_advantages", "grpo_loss", "keyed_advantages"]


def group_advantages(rewards: Sequence[float | None], *, dr_grpo: bool = False, eps: float = 1e-4) -> list[float | None]:
    """Advantages of one (task, role) group: reward minus the group mean, over the std unless Dr.GRPO.

    Rollouts without a reward (None) get None and are left out of the loss; a group with fewer
    than two rewards has no baseline, so all its advantages are None.
    """
    present = [r for r in rewards if r is not None]
    if len(present) < 2:
        return [None] * len(rewards)
    mean = sum(present) / len(present)
    if dr_grpo:
        return [None if r is None else r - mean for r in rewards]
    std = math.sqrt(sum((r - mean) ** 2 for r in present) / (len(present) - 1))
    return [None if r is None else (r - mean) / (std + eps) for r in rewards]


def keyed_advantages(
    items: Sequence[Sequence[tuple[Hashable, float | None]]], *, dr_grpo: bool = False
) -> list[list[float | None]]:
    """Per rollout, the advantage of each (key, reward) item against the items of every rollout with the same key.

    How the rehearse role gets credit per transition: the key names the transition (task, calls so
    far), so a rehearsal is compared only with rehearsals of the same real answer.
    """
    members: dict[Hashable, list[tuple[int, int]]] = {}
    for rollout, row in enumerate(items):
        for position, (key, _) in enumerate(row):
            members.setdefault(key, []).append((rollout, position))
    out: list[list[float | None]] = [[None] * len(row) for row in items]
    for places in members.values():
        values = group_advantages([items[r][p][1] for r, p in places], dr_grpo=dr_grpo)
        for (rollout, position), value in zip(places, values, strict=True):
            out[rollout][position] = value
    return out


@dataclass
class GRPOTerms:
    """The loss and what to log about it."""

    loss: Any  # scalar tensor
    policy_loss: dict[str, float]  # per role
    kl: float | None
    clipped_fraction: float
    tokens: dict[str, int]  # per role


def grpo_loss(
    logprobs: Any,
    old_logprobs: Any,
    advantages: Any,
    sequences: Any,
    roles: Any,
    *,
    clip: float = 0.2,
    ref_logprobs: Any | None = None,
    kl_coef: float = 0.0,
    dr_grpo: bool = False,
    normaliser: float = 1.0,
    role_names: dict[int, str] | None = None,
) -> GRPOTerms:
    """Clipped surrogate over target tokens (T,), each with its advantage, sequence id and role.

    GRPO: the mean over tokens of each sequence (a rollout's tokens of one role), then the mean
    over sequences. Dr.GRPO: the sum over all tokens divided by (sequences × `normaliser`), the
    most tokens a sequence may have. KL to a reference is the k3 estimator, per token.
    """
    import torch

    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = ratio * advantages
    clipped = torch.clamp(ratio, 1.0 - clip, 1.0 + clip) * advantages
    per_token = -torch.minimum(unclipped, clipped)
    kl_value = None
    if ref_logprobs is not None and kl_coef > 0:
        delta = ref_logprobs - logprobs
        kl = torch.exp(delta) - delta - 1.0
        per_token = per_token + kl_coef * kl
        kl_value = float(kl.mean().detach())
    count = int(sequences.max().item()) + 1 if sequences.numel() else 0
    if count == 0:
        zero = logprobs.sum() * 0.0
        return GRPOTerms(zero, {}, kl_value, 0.0, {})
    sums = torch.zeros(count, dtype=per_token.dtype, device=per_token.device).index_add_(0, sequences, per_token)
    lengths = torch.zeros(count, dtype=per_token.dtype, device=per_token.device).index_add_(
        0, sequences, torch.ones_like(per_token))
    used = lengths > 0
    if dr_grpo:
        loss = sums[used].sum() / (int(used.sum()) * normaliser)
    else:
        loss = (sums[used] / lengths[used]).mean()
    names = role_names or {0: "act", 1: "rehearse"}
    policy, tokens = {}, {}
    for role, name in names.items():
        picked = roles == role
        if bool(picked.any()):
            policy[name] = float(per_token[picked].mean().detach())
            tokens[name] = int(picked.sum())
    moved = (ratio - 1.0).abs() > clip
    return GRPOTerms(loss, policy, kl_value, float(moved.float().mean().detach()), tokens)
