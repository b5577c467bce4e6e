"""One joint supervised step: a batch of packed dual-role streams, L = CE(act) + λ·CE(rehearse), one clipped update.

Also the per-role cross-entropy the trainer's diagnostics and GRPO's supervised term and gradient alignment read
(`RoleLosses`). The optimizer, its schedule and the batch order are the shared training core
(`worldsmith.llm.training`), as `train_tiny` uses them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.envace.data import ROLE_ACT, ROLE_REHEARSE, DualRoleStream
from worldsmith.envace.distributed import DataParallel
from worldsmith.envace.grpo_metrics import loss_value
from worldsmith.envace.modeling import collate_streams, target_logprobs
from worldsmith.envace.trainer_state import TrainerState
from worldsmith.llm.training import Optimization, next_indexes

__all__ = ["RoleLosses", "SupervisedLoss", "SupervisedStep"]


class RoleLosses:
    """Each role's mean cross-entropy on packed streams under the model being trained."""

    def __init__(self, model: Any, *, pad_id: int, device: Any) -> None:
        self.model, self.pad_id, self.device = model, pad_id, device

    def __call__(self, streams: Sequence[DualRoleStream]) -> tuple[Any, dict[str, Any], int]:
        """(the target tokens' log-probabilities, each role's CE tensor (None: no tokens), the batch's tokens)."""
        batch = collate_streams(streams, self.pad_id, self.device)
        logprobs = target_logprobs(self.model, batch)
        out: dict[str, Any] = {}
        for role, name in ((ROLE_ACT, "act"), (ROLE_REHEARSE, "rehearse")):
            picked = batch.roles == role
            out[name] = -logprobs[picked].mean() if bool(picked.any()) else None
        return logprobs, out, batch.tokens

    def evaluate(self, streams: Sequence[DualRoleStream]) -> dict[str, float | None]:
        """The per-role losses as numbers, in eval mode and without gradients (the model's mode is kept)."""
        import torch

        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                _, losses, _ = self(streams)
        finally:
            self.model.train(was_training)
        return {name: (float(value) if value is not None else None) for name, value in losses.items()}


@dataclass
class SupervisedLoss:
    """The joint loss of one batch: the total, each role's CE, the tokens read and this process's share of it."""

    loss: Any  # scalar tensor
    losses: dict[str, Any]
    tokens: int
    share: float


class SupervisedStep:
    """Draws the next `batch_size` streams of the seeded epoch order, and trains on their joint loss."""

    def __init__(self, losses: RoleLosses, streams: Sequence[DualRoleStream], optimization: Optimization,
                 parallel: DataParallel, *, batch_size: int, lam: float) -> None:
        self.role_losses, self.streams, self.optimization = losses, streams, optimization
        self.parallel, self.batch_size, self.lam = parallel, batch_size, lam

    def loss(self, state: TrainerState) -> SupervisedLoss:
        """The joint loss of this process's share of the next batch (`state.data_order` advances)."""
        batch = next_indexes(state.data_order, len(self.streams), self.batch_size, state.rng)
        picked = self.parallel.shard(batch)
        logprobs, losses, tokens = self.role_losses([self.streams[i] for i in picked])
        loss = logprobs.sum() * 0.0
        if losses["act"] is not None:
            loss = loss + losses["act"]
        if losses["rehearse"] is not None and self.lam > 0:
            loss = loss + self.lam * losses["rehearse"]
        return SupervisedLoss(loss, losses, tokens, len(picked) / len(batch))

    def update(self, loss: Any, share: float) -> float:
        """One clipped optimizer step on `loss` (gradients averaged over processes by share); the gradient norm."""
        return self.optimization.step(loss, before_clip=lambda params: self.parallel.average_gradients(params, share))

    def __call__(self, state: TrainerState) -> dict[str, Any]:
        """One step; its metrics row (`_tokens` is the trainer's throughput count)."""
        result = self.loss(state)
        norm = self.update(result.loss, result.share)
        return {
            "loss": round(float(result.loss.detach()), 6),
            "act_loss": loss_value(result.losses["act"]),
            "rehearse_loss": loss_value(result.losses["rehearse"]),
            "grad_norm": round(norm, 4), "tokens": result.tokens, "_tokens": result.tokens,
        }
