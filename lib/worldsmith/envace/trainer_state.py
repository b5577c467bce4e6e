"""What an EnvACE checkpoint carries besides tensors: one dataclass, saved and resumed as one thing.

Weights, optimizer moments and torch's generators are tensors (safetensors files beside it); everything
else that decides what the next step does lives here, so a resumed run draws the same batches, rollouts
and rollout source as an uninterrupted one. Adding a field here is all it takes to make it resumable.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["TrainerState"]


@dataclass
class TrainerState:
    """The resumable state of a `Trainer` (everything but tensors)."""

    step: int = 0
    rng: random.Random = field(default_factory=random.Random)  # data order, task draws, rollout choices
    data_order: list[int] = field(default_factory=list)  # the epoch's remaining sample order
    task_order: list[int] = field(default_factory=list)  # the GRPO task order
    first: dict[str, Any] = field(default_factory=dict)  # the losses before the first step
    best_fidelity: float | None = None
    source: str = "real"  # the rollout source in use (it may switch when fidelity drifts)
    switched_at: int | None = None
    drift: bool = False
    last_fidelity: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def fresh(cls, seed: int, source: str) -> TrainerState:
        return cls(rng=random.Random(seed), source=source)

    def to_json(self, **extra: Any) -> dict[str, Any]:
        """The checkpoint's `trainer_state.json`: these fields (the RNG as its state) plus `extra` facts."""
        out: dict[str, Any] = {}
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "rng":
                version, internal, gauss = value.getstate()
                value = [version, list(internal), gauss]
            elif isinstance(value, list | dict):
                value = type(value)(value)
            out["python_rng" if item.name == "rng" else item.name] = value
        return {**out, **extra, "saved": time.time()}

    @classmethod
    def from_json(cls, data: dict[str, Any], *, default_source: str) -> TrainerState:
        """Read back what `to_json` wrote (checkpoints from before a field existed get its default)."""
        version, internal, gauss = data["python_rng"]
        rng = random.Random()
        rng.setstate((version, tuple(internal), gauss))
        return cls(
            step=int(data["step"]), rng=rng, data_order=list(data["data_order"]), task_order=list(data["task_order"]),
            first=dict(data["first"]), best_fidelity=data.get("best_fidelity"),
            source=data.get("source") or default_source, switched_at=data.get("switched_at"),
            drift=bool(data.get("drift")), last_fidelity=dict(data.get("last_fidelity") or {}),
        )
