"""The shared training core: the warmup-cosine schedule, the seeded epoch order, AdamW's groups and clipped step,
optimizer state that resumes to the same update, and folders that appear whole or not at all."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from worldsmith.llm.training import (
    Optimization,
    OptimizationSettings,
    lr_factor,
    next_indexes,
    save_pretrained,
    staged_folder,
)

torch = pytest.importorskip("torch")


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))


def _loss(model: torch.nn.Module, step: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(step)
    inputs = torch.randn(5, 4, generator=generator)
    return (model(inputs) ** 2).mean()


def test_lr_warms_up_linearly_then_decays_by_cosine_to_the_floor() -> None:
    assert [lr_factor(step, 10, 2) for step in (0, 1)] == [0.5, 1.0]
    assert lr_factor(2, 10, 2) == pytest.approx(1.0)
    assert lr_factor(6, 10, 2) == pytest.approx(0.55)  # halfway through the decay
    assert lr_factor(10, 10, 2) == pytest.approx(0.1) and lr_factor(50, 10, 2) == pytest.approx(0.1)
    assert lr_factor(9, 10, 2, cosine=False) == 1.0 and lr_factor(0, 10, 0) == 1.0
    assert lr_factor(10, 10, 0, min_ratio=0.0) == pytest.approx(0.0)


def test_the_epoch_order_visits_every_index_once_per_pass_and_resumes_from_its_saved_state() -> None:
    rng, order = random.Random(3), []
    first_pass = next_indexes(order, 7, 7, rng)
    assert sorted(first_pass) == list(range(7)) and order == []
    draws = [next_indexes(order, 7, 3, rng) for _ in range(4)]
    assert sorted(draws[0] + draws[1] + draws[2][:1]) == list(range(7))  # a batch may span two passes
    # a copy of (order, rng) taken mid-pass draws what the original draws next
    saved_order, saved_rng = list(order), random.Random()
    saved_rng.setstate(rng.getstate())
    assert next_indexes(saved_order, 7, 10, saved_rng) == next_indexes(order, 7, 10, rng)


def test_adamw_decays_weights_not_biases_and_reports_the_unclipped_norm() -> None:
    model = _model()
    optimization = Optimization(model, OptimizationSettings(lr=0.1, steps=4, weight_decay=0.05, grad_clip=1e-3))
    decay, no_decay = optimization.optimizer.param_groups
    assert decay["weight_decay"] == 0.05 and all(p.dim() == 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() == 1 for p in no_decay["params"])
    norm = optimization.step(_loss(model, 0))
    clipped = torch.cat([p.grad.reshape(-1) for p in optimization.parameters]).norm()
    assert norm > 1e-2 and float(clipped) == pytest.approx(1e-3, rel=1e-3)


def test_frozen_parameters_are_left_out_and_before_clip_sees_the_gradients() -> None:
    model = _model()
    model[0].weight.requires_grad_(False)
    optimization = Optimization(model, OptimizationSettings(lr=0.1, steps=2))
    assert all(p is not model[0].weight for p in optimization.parameters) and len(optimization.parameters) == 3
    seen: list[float] = []
    optimization.step(_loss(model, 0), before_clip=lambda params: seen.extend(float(p.grad.abs().sum()) for p in params))
    assert len(seen) == 3 and all(value > 0 for value in seen)


def test_set_step_sets_every_groups_rate() -> None:
    optimization = Optimization(_model(), OptimizationSettings(lr=0.2, steps=10, warmup_steps=4))
    assert optimization.set_step(1) == pytest.approx(0.1)
    assert [group["lr"] for group in optimization.optimizer.param_groups] == [optimization.lr] * 2


def test_saved_optimizer_state_resumes_to_the_same_weights_as_an_uninterrupted_run(tmp_path: Path) -> None:
    settings = OptimizationSettings(lr=0.05, steps=6, warmup_steps=2, weight_decay=0.01)

    def run(model: torch.nn.Module, optimization: Optimization, steps: range) -> None:
        for step in steps:
            optimization.set_step(step)
            optimization.step(_loss(model, step))

    whole = _model()
    run(whole, Optimization(whole, settings), range(6))

    first = _model()
    optimization = Optimization(first, settings)
    run(first, optimization, range(3))
    optimization.save(tmp_path)
    assert {path.name for path in tmp_path.iterdir()} == {"optimizer.safetensors", "optimizer.json"}
    resumed = _model(seed=1)  # other weights: the state dict below replaces them
    resumed.load_state_dict(first.state_dict())
    again = Optimization(resumed, settings)
    again.load(tmp_path, "cpu")
    run(resumed, again, range(3, 6))
    for left, right in zip(whole.parameters(), resumed.parameters(), strict=True):
        assert torch.equal(left, right)


def test_a_staged_folder_replaces_its_target_whole_or_leaves_it_alone(tmp_path: Path) -> None:
    target = tmp_path / "model"
    target.mkdir()
    (target / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), staged_folder(target) as staging:
        (staging / "half.txt").write_text("half")
        raise RuntimeError("killed while writing")
    assert [path.name for path in target.iterdir()] == ["old.txt"]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["model"]  # no staging folder left behind
    with staged_folder(target, "checkpoint") as staging:
        (staging / "sub").mkdir()
        (staging / "sub" / "new.txt").write_text("new")
        (staging / "sub" / "new.txt").chmod(0o600)
    assert [path.name for path in target.iterdir()] == ["sub"]
    assert (target / "sub" / "new.txt").stat().st_mode & 0o777 == 0o644


def test_save_pretrained_writes_a_loadable_safetensors_model(tmp_path: Path) -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=16)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    save_pretrained(tmp_path, model)
    assert (tmp_path / "model.safetensors").is_file() and not list(tmp_path.glob("*.bin"))
    loaded = LlamaForCausalLM.from_pretrained(tmp_path)
    for left, right in zip(model.state_dict().values(), loaded.state_dict().values(), strict=True):
        assert torch.equal(left, right)
