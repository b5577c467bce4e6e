"""The trainer's steps on their own, on the bundled tiny model: a supervised step draws the next batch of the
seeded order and trains on CE(act) + λ·CE(rehearse); a GRPO step draws tasks from the same order, rolls them out
and updates; both are deterministic for a state."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from envace_support import TINY, bfcl_episodes, small_config

from worldsmith.envace.config import DataConfig
from worldsmith.envace.data import ChatFormat, Templates, build_streams, transcript_from_episode
from worldsmith.envace.distributed import DataParallel
from worldsmith.envace.grpo_step import GrpoPolicy, GrpoStep
from worldsmith.envace.modeling import load_policy
from worldsmith.envace.rollouts import RealResponseCache, task_specs
from worldsmith.envace.supervised_step import RoleLosses, SupervisedStep
from worldsmith.envace.trainer_state import TrainerState
from worldsmith.envs import available
from worldsmith.llm.training import Optimization, OptimizationSettings

torch = pytest.importorskip("torch")
needs_bfcl = pytest.mark.skipif(not available("bfcl"), reason="bfcl-eval is not installed")


@pytest.fixture(scope="module")
def loaded() -> tuple[Any, Any, list]:
    torch.manual_seed(0)
    model, tokenizer = load_policy(TINY, device="cpu")
    streams = build_streams(bfcl_episodes()[:2], tokenizer, DataConfig(paths=["x"], max_seq_len=384))
    return model, tokenizer, streams


def _supervised(model: Any, tokenizer: Any, streams: list, *, lam: float = 1.0) -> SupervisedStep:
    model = copy.deepcopy(model).train()
    losses = RoleLosses(model, pad_id=ChatFormat(tokenizer).pad_id, device=torch.device("cpu"))
    optimization = Optimization(model, OptimizationSettings(lr=3e-3, steps=8))
    return SupervisedStep(losses, streams, optimization, DataParallel(), batch_size=2, lam=lam)


def test_a_supervised_step_draws_the_seeded_order_and_is_deterministic(loaded) -> None:
    model, tokenizer, streams = loaded
    assert len(streams) >= 3
    rows = []
    for _ in range(2):
        step, state = _supervised(model, tokenizer, streams), TrainerState.fresh(0, "real")
        rows.append([step(state) for _ in range(2)])
        assert len(state.data_order) == (-4) % len(streams)  # four streams drawn from the first pass(es)
    assert rows[0] == rows[1]
    first = rows[0][0]
    assert first["tokens"] == first["_tokens"] > 0 and first["grad_norm"] > 0
    assert first["loss"] == pytest.approx(first["act_loss"] + first["rehearse_loss"], abs=1e-4)


def test_lambda_zero_trains_the_act_role_alone_and_steps_lower_the_loss(loaded) -> None:
    model, tokenizer, streams = loaded
    step = _supervised(model, tokenizer, streams[:2], lam=0.0)
    state = TrainerState.fresh(0, "real")
    before = step.role_losses.evaluate(streams[:2])
    rows = [step(state) for _ in range(4)]
    assert all(row["loss"] == pytest.approx(row["act_loss"], abs=1e-5) for row in rows)
    after = step.role_losses.evaluate(streams[:2])
    assert after["act"] < before["act"] - 0.3


@needs_bfcl
def test_a_grpo_step_rolls_out_the_next_tasks_and_adds_the_supervised_term(loaded, tmp_path) -> None:
    model, tokenizer, streams = loaded
    config = small_config(tmp_path, objective="grpo", batch_size=1,
                          **{"grpo.sft_coef": 0.5, "grpo.group_size": 2, "grpo.reward": "shaped"})
    supervised = _supervised(model, tokenizer, streams)
    transcripts = [transcript_from_episode(episode) for episode in bfcl_episodes()[:2]]
    generator = torch.Generator().manual_seed(1)
    step = GrpoStep(config, GrpoPolicy(supervised.role_losses.model, tokenizer, None, generator), supervised,
                    specs=task_specs(transcripts), templates=Templates.from_config(config.data),
                    diagnostic=streams[:2], book=None, cache=RealResponseCache(), pad_id=ChatFormat(tokenizer).pad_id,
                    device=torch.device("cpu"))
    state = TrainerState.fresh(0, "real")
    row = step(state)
    assert row["source"] == "real" and row["rollouts"] == 2
    assert len(state.task_order) == 1 and len(state.data_order) == len(streams) - 2  # one task, one sft batch
    assert "act_loss" in row and "reward_act" in row and "pg_loss_act" in row
