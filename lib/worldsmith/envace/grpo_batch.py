"""The data one GRPO step passes along: generate-and-score gives `ScoredRollouts`, `pack_batch` turns them into the
loss's inputs (`GRPOBatch`), the update reports a `GRPOUpdate`. Split as TRL splits generation-and-scoring from the
loss, so each part can be read (and tested) on its own."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from worldsmith.envace.advantages import RolloutAdvantages, token_advantages
from worldsmith.envace.config import GRPOConfig
from worldsmith.envace.data import Templates
from worldsmith.envace.generate import DecodeStats
from worldsmith.envace.grpo import GRPOTerms
from worldsmith.envace.modeling import PackedBatch, collate_streams
from worldsmith.envace.rollouts import RehearseMode, Rollout, RolloutGroup, RolloutSettings
from worldsmith.llm.prompt_lookup import PromptLookup

if TYPE_CHECKING:
    import torch

__all__ = ["GRPOBatch", "GRPOUpdate", "ScoredRollouts", "pack_batch", "rollout_settings"]


def rollout_settings(grpo: GRPOConfig, templates: Templates, lookup: PromptLookup | None) -> RolloutSettings:
    """How GRPO samples: the rehearse role also rehearses the steps a source answers (every call, or every
    action) whenever it is trained on real answers."""
    rehearse: RehearseMode = "needed"
    if grpo.train_roles != "act" and grpo.rehearse_in_real:
        rehearse = "calls" if grpo.rehearse_calls_only else "always"
    return RolloutSettings(group_size=grpo.group_size, templates=templates, max_steps=grpo.max_steps,
                           max_new_tokens=grpo.max_new_tokens, temperature=grpo.temperature, rehearse=rehearse,
                           lookup=lookup)


@dataclass
class ScoredRollouts:
    """Generate-and-score's result: the rollout groups with their rewards filled, and what decoding them cost."""

    groups: list[RolloutGroup]
    stats: DecodeStats

    @property
    def rollouts(self) -> list[Rollout]:
        return [item for group in self.groups for item in group.rollouts]


@dataclass
class GRPOBatch:
    """Scored rollouts packed for the loss: the packed streams and, for the target tokens that count, their index,
    advantage, sequence id and role as tensors."""

    packed: PackedBatch
    keep: torch.Tensor  # (K,) long: positions among the packed target tokens
    values: torch.Tensor  # (K,) float32 advantages
    sequences: torch.Tensor  # (K,) long sequence ids
    roles: torch.Tensor  # (K,) role ids


def pack_batch(
    scored: ScoredRollouts, advantages: RolloutAdvantages, trained: Collection[int], *, pad_id: int, device: Any
) -> GRPOBatch:
    """Collate the rollouts' streams and broadcast their advantages to the target tokens (`token_advantages`)."""
    import torch

    packed = collate_streams([item.stream for item in scored.rollouts], pad_id, device)
    rows = packed.rows.tolist()
    segments = packed.segments[packed.rows, packed.columns].tolist() if len(rows) else []
    tokens = token_advantages(rows, packed.roles.tolist(), segments, advantages, trained)
    keep = torch.tensor(tokens.keep, dtype=torch.long, device=device)
    return GRPOBatch(
        packed, keep,
        values=torch.tensor(tokens.values, dtype=torch.float32, device=device),
        sequences=torch.tensor(tokens.sequences, dtype=torch.long, device=device),
        roles=packed.roles[keep],
    )


@dataclass
class GRPOUpdate:
    """What the update did: the loss terms of its last pass, per role the cosine of GRPO's gradient with the
    supervised one (`grpo.log_alignment`), the supervised losses (`grpo.sft_coef`) and the tokens it read."""

    terms: GRPOTerms
    alignment: dict[str, float]
    sft_losses: dict[str, Any]
    tokens: int
