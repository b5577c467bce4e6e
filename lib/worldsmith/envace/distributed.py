"""Data parallelism for the EnvACE trainer across processes (several GPUs, or CPU processes), through accelerate.

Launched with `accelerate launch --multi_gpu --num_processes N $(which worldsmith) envace train ...` (or
`torchrun --nproc_per_node N -m worldsmith envace train ...`), every process runs the same loop on the same
seeded orders and holds the same weights; each takes its share of a step's batch (`shard`: data chunks for the
supervised loss, tasks for GRPO, so every GRPO group stays inside one process and its baseline is exact),
samples with its own generator, and the gradients are averaged, weighted by share, before the one optimizer
step every process takes. The weights therefore stay identical without a DDP wrapper (generation uses the bare
model). The probe is greedy, so every process reaches the same fidelity and the same source switch; only the
main process writes the run store. Each process keeps its own response cache (`rollout_source: cache`) from
its own rollouts, and a checkpoint keeps the main process's, so a resumed `cache` run is exact only on one
process. Without a launcher (WORLD_SIZE unset or 1) nothing here does anything.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["COUNTED_FIELDS", "DataParallel", "flatten_gradients"]

# per-step metrics that add up across processes (the rest are averaged)
COUNTED_FIELDS = frozenset({"rollouts", "rollout_steps", "generated_tokens", "reused_tokens", "tokens", "_tokens"})


def flatten_gradients(grads: Sequence[Any | None], parameters: Sequence[Any]) -> Any:
    """One float32 vector of `grads` in parameter order (a parameter without a gradient counts as zeros)."""
    import torch

    return torch.cat([(g if g is not None else torch.zeros_like(p)).reshape(-1).float()
                      for g, p in zip(grads, parameters, strict=True)])


class DataParallel:
    """This process's place among the trainer's processes (a single process when `accelerator` is None)."""

    def __init__(self, accelerator: Any | None = None) -> None:
        self.accelerator = accelerator
        self.rank = int(accelerator.process_index) if accelerator is not None else 0
        self.world = int(accelerator.num_processes) if accelerator is not None else 1

    @classmethod
    def from_environment(cls, device: str | None = None) -> DataParallel:
        """Join the launcher's process group when there is one (WORLD_SIZE > 1)."""
        if int(os.environ.get("WORLD_SIZE", "1")) <= 1:
            return cls(None)
        import torch
        from accelerate import Accelerator

        cpu = (device or "").startswith("cpu") or not torch.cuda.is_available()
        return cls(Accelerator(cpu=cpu))

    @property
    def active(self) -> bool:
        return self.world > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def device(self) -> Any | None:
        """The device accelerate assigned to this process (None: single process, the config decides)."""
        if self.accelerator is None:
            return None
        device = self.accelerator.device
        if device.type == "cpu":  # accelerate may say cpu:0, which some loaders (safetensors) refuse
            import torch

            return torch.device("cpu")
        return device

    def shard(self, items: Sequence[int]) -> list[int]:
        """This process's share of a step's batch (round robin, so shares differ by at most one)."""
        return list(items)[self.rank::self.world]

    def average_gradients(self, parameters: Sequence[Any], share: float) -> None:
        """Replace each gradient by the share-weighted sum over processes (shares add up to 1)."""
        if not self.active or self.accelerator is None:  # several processes always come with an accelerator
            return
        flat = flatten_gradients([p.grad for p in parameters], parameters) * share
        flat = self.accelerator.reduce(flat, reduction="sum")
        offset = 0
        for parameter in parameters:
            n = parameter.numel()
            parameter.grad = flat[offset:offset + n].view_as(parameter).to(parameter.dtype)
            offset += n

    def gather(self, value: Any) -> list[Any]:
        """Every process's `value`, in rank order (on every process)."""
        if not self.active:
            return [value]
        from accelerate.utils import gather_object

        return list(gather_object([value]))

    def merge_rows(self, row: dict[str, Any]) -> dict[str, Any]:
        """One step's metrics over all processes: counts summed, other numbers averaged, the rest as logged here."""
        if not self.active:
            return row
        rows = self.gather(row)
        merged = dict(row)
        for key, value in row.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                continue
            values = [other[key] for other in rows if isinstance(other.get(key), int | float)]
            merged[key] = sum(values) if key in COUNTED_FIELDS else round(sum(values) / len(values), 6)
        merged["processes"] = self.world
        return merged

    def barrier(self) -> None:
        if self.active and self.accelerator is not None:
            self.accelerator.wait_for_everyone()
