"""What every trainer here shares: AdamW with a warmup-cosine schedule and clipped steps, a seeded epoch
sampler, and checkpoint files written beside their target and renamed into place.

Both `llm.tiny.train_tiny` and the EnvACE trainer (`envace.Trainer`, its `SupervisedStep` and `GrpoStep`)
train through it, so a change to how weights are optimised, batches drawn or optimizer state saved is made
once; the numbers a seed gives are those each trainer gave before it shared this module.

    optimization = Optimization(model, OptimizationSettings(lr=1e-3, steps=100, warmup_steps=10))
    for step in range(100):
        optimization.set_step(step)
        batch = next_indexes(order, len(rows), 4, rng)
        norm = optimization.step(loss_of(batch))
"""

from __future__ import annotations

import contextlib
import inspect
import json
import math
import os
import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from worldsmith.util.dirs import replacing_dir

__all__ = [
    "Optimization",
    "OptimizationSettings",
    "lr_factor",
    "next_indexes",
    "save_pretrained",
    "staged_folder",
]

OPTIMIZER_TENSORS = "optimizer.safetensors"
OPTIMIZER_JSON = "optimizer.json"


def lr_factor(step: int, steps: int, warmup: int, *, min_ratio: float = 0.1, cosine: bool = True) -> float:
    """The learning rate of 0-based `step` as a fraction of the peak: linear warmup, then cosine decay to
    `min_ratio` (or constant when not `cosine`)."""
    if step < warmup:
        return (step + 1) / warmup
    if not cosine:
        return 1.0
    progress = (step - warmup) / max(1, steps - warmup)
    return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))


def next_indexes(order: list[int], count: int, size: int, rng: random.Random) -> list[int]:
    """The next `size` indexes of a seeded order over `count` items, reshuffled by `rng` every pass.

    `order` is the pass's remaining indexes, consumed from its end and refilled in place, so a trainer that
    saves it (and `rng`'s state) draws the same batches after a resume.
    """
    picked: list[int] = []
    while len(picked) < size:
        if not order:
            order.extend(range(count))
            rng.shuffle(order)
        picked.append(order.pop())
    return picked


@dataclass(frozen=True)
class OptimizationSettings:
    """AdamW's rate, decay and clipping, and the schedule over `steps` optimizer steps."""

    lr: float
    steps: int
    warmup_steps: int = 0
    schedule: Literal["constant", "cosine"] = "cosine"
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.0
    grad_clip: float = 1.0
    betas: tuple[float, float] = (0.9, 0.95)


class Optimization:
    """AdamW over a model's trainable weights (no decay on biases and norms), the learning rate of each step,
    the clipped update, and the optimizer state as checkpoint files (safetensors for tensors, JSON for the rest)."""

    def __init__(self, model: Any, settings: OptimizationSettings) -> None:
        import torch

        self.settings = settings
        self.parameters = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in self.parameters if p.dim() >= 2]
        no_decay = [p for p in self.parameters if p.dim() < 2]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": settings.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=settings.lr, betas=settings.betas,
        )

    @property
    def lr(self) -> float:
        return float(self.optimizer.param_groups[0]["lr"])

    def set_step(self, step: int) -> float:
        """Set (and return) the learning rate of 0-based `step`."""
        s = self.settings
        lr = s.lr * lr_factor(step, s.steps, s.warmup_steps, min_ratio=s.min_lr_ratio, cosine=s.schedule == "cosine")
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        return lr

    def step(self, loss: Any, *, before_clip: Callable[[Sequence[Any]], None] | None = None) -> float:
        """Backpropagate `loss`, clip the gradients' norm, update; the norm before clipping.

        `before_clip` sees the trainable parameters once their gradients are in (data-parallel averaging).
        """
        import torch

        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if before_clip is not None:
            before_clip(self.parameters)
        norm = torch.nn.utils.clip_grad_norm_(self.parameters, self.settings.grad_clip)
        self.optimizer.step()
        return float(norm)

    def save(self, folder: Path) -> None:
        """The optimizer's moments (`optimizer.safetensors`) and parameter groups (`optimizer.json`) in `folder`."""
        from safetensors.torch import save_file

        state = self.optimizer.state_dict()
        tensors: dict[str, Any] = {}
        for index, values in state["state"].items():
            for name, value in values.items():
                tensors[f"{index}/{name}"] = value.detach().to("cpu").contiguous()
        save_file(tensors, str(folder / OPTIMIZER_TENSORS))
        groups = [{key: (list(value) if isinstance(value, tuple) else value) for key, value in group.items()}
                  for group in state["param_groups"]]
        (folder / OPTIMIZER_JSON).write_text(json.dumps({"param_groups": groups}), encoding="utf-8")

    def load(self, folder: Path, device: Any) -> None:
        """Read back what `save` wrote, the moments onto `device`."""
        from safetensors.torch import load_file

        tensors = load_file(str(folder / OPTIMIZER_TENSORS), device=str(device))
        groups = json.loads((folder / OPTIMIZER_JSON).read_text(encoding="utf-8"))["param_groups"]
        for group in groups:
            if isinstance(group.get("betas"), list):
                group["betas"] = tuple(group["betas"])
        per_param: dict[int, dict[str, Any]] = {}
        for key, value in tensors.items():
            index, name = key.split("/", 1)
            per_param.setdefault(int(index), {})[name] = value.to("cpu") if name == "step" else value
        self.optimizer.load_state_dict({"state": per_param, "param_groups": groups})


@contextlib.contextmanager
def staged_folder(target: Path, purpose: str = "staging") -> Iterator[Path]:
    """A new folder beside `target` to write into; on success its files become world-readable and it replaces
    `target` in one rename, on failure it is deleted (a reader never sees half a model or checkpoint)."""
    with replacing_dir(target, purpose) as staging:
        yield staging
        for path in staging.rglob("*"):
            if path.is_file():
                os.chmod(path, 0o644)  # save_pretrained leaves some files private (0600)


def save_pretrained(folder: Path, *parts: Any) -> None:
    """`save_pretrained` of each model or tokenizer in `parts` into `folder` (safetensors), without progress bars."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        for part in parts:
            safe = "safe_serialization" in inspect.signature(part.save_pretrained).parameters  # gone in 5.x
            part.save_pretrained(folder, **({"safe_serialization": True} if safe else {}))
    finally:
        if bars:
            hf_logging.enable_progress_bar()
