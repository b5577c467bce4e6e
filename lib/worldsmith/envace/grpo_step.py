"""One role-wise GRPO step: generate and score G rollouts per task, broadcast their advantages to the tokens,
update on the clipped loss (plus the supervised term), report the metrics row.

The update goes through the same shared core (`worldsmith.llm.training.Optimization`) as the supervised step
and `train_tiny`; what a GRPO step adds is the rollouts (`rollouts`), the advantages (`advantages`), the packed
batch (`grpo_batch`) and the loss (`grpo`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from worldsmith.envace.advantages import TRAINED_ROLES, rollout_advantages
from worldsmith.envace.config import EnvACEConfig
from worldsmith.envace.data import ROLE_ACT, ROLE_REHEARSE, DualRoleStream, Templates
from worldsmith.envace.distributed import flatten_gradients
from worldsmith.envace.generate import DecodeStats
from worldsmith.envace.grpo import GRPOTerms, grpo_loss
from worldsmith.envace.grpo_batch import GRPOBatch, GRPOUpdate, ScoredRollouts, pack_batch, rollout_settings
from worldsmith.envace.grpo_metrics import grpo_metrics
from worldsmith.envace.modeling import target_logprobs
from worldsmith.envace.rollouts import RealResponseCache, TaskSpec, make_source_factory, rollout, score_rollouts
from worldsmith.envace.supervised_step import SupervisedStep
from worldsmith.envace.trainer_state import TrainerState
from worldsmith.llm.training import next_indexes

__all__ = ["GrpoPolicy", "GrpoStep"]


@dataclass
class GrpoPolicy:
    """The models a GRPO step samples from and compares with: the policy, its tokenizer, the frozen reference
    (`grpo.kl_coef` > 0) and the generator rollouts sample with."""

    model: Any
    tokenizer: Any
    reference: Any | None
    generator: Any  # torch.Generator


class GrpoStep:
    """Generate-and-score, advantages, the packed batch, `updates_per_batch` clipped updates, the metrics row."""

    def __init__(self, config: EnvACEConfig, policy: GrpoPolicy, supervised: SupervisedStep, *, specs: list[TaskSpec],
                 templates: Templates, diagnostic: list[DualRoleStream], book: Any | None,
                 cache: RealResponseCache, pad_id: int, device: Any) -> None:
        self.config, self.policy, self.supervised = config, policy, supervised
        self.specs, self.templates, self.diagnostic = specs, templates, diagnostic
        self.book, self.cache, self.pad_id, self.device = book, cache, pad_id, device

    def __call__(self, state: TrainerState) -> dict[str, Any]:
        grpo = self.config.grpo
        scored, share = self.generate_and_score(state)
        advantages = rollout_advantages(scored.groups, dr_grpo=grpo.dr_grpo, credit=grpo.rehearse_credit)
        batch = pack_batch(scored, advantages, TRAINED_ROLES[grpo.train_roles], pad_id=self.pad_id, device=self.device)
        update = self.update(batch, state, share)
        return grpo_metrics(scored, advantages, update, source=state.source, log_alignment=grpo.log_alignment)

    def generate_and_score(self, state: TrainerState) -> tuple[ScoredRollouts, float]:
        """This process's share of the step's tasks, rolled out from the current source and scored; and that share."""
        config, grpo = self.config, self.config.grpo
        batch_tasks = next_indexes(state.task_order, len(self.specs), config.batch_size, state.rng)
        picked = self.supervised.parallel.shard(batch_tasks)
        specs = [self.specs[i] for i in picked]
        factory = make_source_factory(state.source, env=config.data.env, book=self.book, cache=self.cache)
        settings = rollout_settings(grpo, self.templates, config.prompt_lookup.settings(rollouts=True))
        stats = DecodeStats()
        groups = rollout(self.policy.model, self.policy.tokenizer, specs, factory, settings,
                         generator=self.policy.generator, stats=stats)
        score_rollouts(groups, env=config.data.env, reward=grpo.reward, rehearse_metric=grpo.rehearse_metric,
                       cache=self.cache if state.source == "cache" else None)
        return ScoredRollouts(groups, stats), len(picked) / len(batch_tasks)

    def update(self, batch: GRPOBatch, state: TrainerState, share: float) -> GRPOUpdate:
        """`updates_per_batch` optimizer steps on the clipped GRPO loss of `batch` (+ the supervised term)."""
        import torch

        grpo, model = self.config.grpo, self.policy.model
        packed, keep = batch.packed, batch.keep
        ref = None
        if self.policy.reference is not None and keep.numel():
            with torch.no_grad():
                ref = target_logprobs(self.policy.reference, packed, temperature=grpo.temperature)[keep]
        old = None
        if grpo.updates_per_batch > 1 and keep.numel():
            with torch.no_grad():
                old = target_logprobs(model, packed, temperature=grpo.temperature)[keep]

        def surrogate(logprobs: Any, picked: Any = slice(None)) -> GRPOTerms:
            before = old if old is not None else logprobs.detach()
            return grpo_loss(logprobs[picked], before[picked], batch.values[picked], batch.sequences[picked],
                             batch.roles[picked], clip=grpo.clip, ref_logprobs=ref[picked] if ref is not None else None,
                             kl_coef=grpo.kl_coef, dr_grpo=grpo.dr_grpo,
                             normaliser=float(grpo.max_new_tokens * grpo.max_steps))

        terms: GRPOTerms | None = None
        sft_losses: dict[str, Any] = {}
        alignment: dict[str, float] = {}
        tokens = packed.tokens
        for update in range(grpo.updates_per_batch):
            logprobs = target_logprobs(model, packed, temperature=grpo.temperature)[keep]
            terms = surrogate(logprobs)
            loss = terms.loss
            if grpo.log_alignment and update == 0:
                masks = {"act": batch.roles == ROLE_ACT, "rehearse": batch.roles == ROLE_REHEARSE}
                alignment = self.alignment({name: surrogate(logprobs, mask).loss
                                            for name, mask in masks.items() if bool(mask.any())})
            if grpo.sft_coef > 0:
                sft = self.supervised.loss(state)
                loss = loss + grpo.sft_coef * sft.loss
                sft_losses = sft.losses
                tokens += sft.tokens
            self.supervised.update(loss, share)
        assert terms is not None
        return GRPOUpdate(terms, alignment, sft_losses, tokens)

    def alignment(self, parts: dict[str, Any]) -> dict[str, float]:
        """Per role, the cosine between the gradient of its policy-gradient loss (`parts`) and that of its
        cross-entropy on the diagnostic chunks: > 0 means a small gradient step on that role's GRPO loss alone
        lowers its supervised loss (first order; Adam rescales each coordinate, so its step can differ)."""
        import torch

        model = self.policy.model
        parameters = self.supervised.optimization.parameters

        def flat(value: Any) -> Any:
            grads = torch.autograd.grad(value, parameters, retain_graph=True, allow_unused=True)
            return flatten_gradients(grads, parameters)

        was_training = model.training
        model.eval()
        try:
            _, losses, _ = self.supervised.role_losses(self.diagnostic)
            return {name: float(torch.nn.functional.cosine_similarity(flat(part), flat(losses[name]), dim=0))
                    for name, part in parts.items() if losses.get(name) is not None}
        finally:
            model.train(was_training)
