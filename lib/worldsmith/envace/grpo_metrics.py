"""The metrics row of one GRPO step (`metrics.jsonl`), from its scored rollouts, advantages and update; and the
small statistics the trainer's rows share."""

from __future__ import annotations

import math
from typing import Any

from worldsmith.envace.advantages import RolloutAdvantages
from worldsmith.envace.grpo_batch import GRPOUpdate, ScoredRollouts

__all__ = ["grpo_metrics", "loss_value", "mean", "rounded", "std"]


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def std(values: list[float]) -> float | None:
    """The population standard deviation (None for no values)."""
    if not values:
        return None
    centre = sum(values) / len(values)
    return math.sqrt(sum((v - centre) ** 2 for v in values) / len(values))


def rounded(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(float(value), digits)


def loss_value(loss: Any) -> float | None:
    """A loss tensor (or None, when a role had no tokens) as the rounded number a metrics row logs."""
    return None if loss is None else rounded(float(loss.detach()))


def grpo_metrics(
    scored: ScoredRollouts, advantages: RolloutAdvantages, update: GRPOUpdate, *, source: str, log_alignment: bool
) -> dict[str, Any]:
    """Rewards and advantages per role, the loss terms, decoding counts; `_tokens` feeds the run's throughput."""
    rollouts, stats, terms = scored.rollouts, scored.stats, update.terms
    act_rewards = [item.task_reward for item in rollouts if item.task_reward is not None]
    reh_rewards = [item.rehearse_reward for item in rollouts if item.rehearse_reward is not None]
    act_adv, reh_adv = advantages.act_values(), advantages.rehearse_values()
    tokens = update.tokens + stats.forward_tokens
    row: dict[str, Any] = {
        "loss": rounded(float(terms.loss.detach())),
        "reward": rounded(mean(act_rewards)),
        "reward_act": rounded(mean(act_rewards)),
        "reward_rehearse": rounded(mean(reh_rewards)),
        "adv_mean": rounded(mean(act_adv + reh_adv)), "adv_std": rounded(std(act_adv + reh_adv)),
        "adv_act_mean": rounded(mean(act_adv)), "adv_act_std": rounded(std(act_adv)),
        "adv_rehearse_mean": rounded(mean(reh_adv)), "adv_rehearse_std": rounded(std(reh_adv)),
        "pg_loss_act": rounded(terms.policy_loss.get("act")),
        "pg_loss_rehearse": rounded(terms.policy_loss.get("rehearse")),
        "kl": rounded(terms.kl), "clipped_fraction": rounded(terms.clipped_fraction),
        "success_rate": rounded(mean([1.0 if item.final_info.get("won") else 0.0 for item in rollouts])),
        "source": source, "rollouts": len(rollouts),
        "rollout_steps": sum(len(item.steps) for item in rollouts),
        "generated_tokens": stats.generated_tokens, "reused_tokens": stats.reused_tokens,
        "tokens_per_pass": rounded(stats.lookup.tokens_per_pass),
        "tokens": tokens, "_tokens": tokens,
    }
    if log_alignment:
        row["pg_align_act"] = rounded(update.alignment.get("act"))
        row["pg_align_rehearse"] = rounded(update.alignment.get("rehearse"))
    sft = update.sft_losses
    if sft:
        row["act_loss"] = loss_value(sft.get("act"))
        row["rehearse_loss"] = loss_value(sft.get("rehearse"))
    return row
