"""TrainerState: every field survives a checkpoint's JSON, and the RNG resumes where it stopped."""

from __future__ import annotations

import json
from dataclasses import fields

from worldsmith.envace import TrainerState


def test_every_field_round_trips_through_json() -> None:
    state = TrainerState.fresh(seed=7, source="real")
    state.rng.random()
    state.step, state.data_order, state.task_order = 12, [3, 1, 2], [0, 4]
    state.first, state.best_fidelity, state.source = {"act_loss": 1.5, "rehearse_loss": None}, 0.75, "imagined"
    state.switched_at, state.drift, state.last_fidelity = 10, True, {"exact": 0.5}
    saved = json.loads(json.dumps(state.to_json(fingerprint="abc", processes=1)))
    assert saved["fingerprint"] == "abc" and saved["processes"] == 1 and "saved" in saved
    restored = TrainerState.from_json(saved, default_source="real")
    for item in fields(TrainerState):
        if item.name != "rng":
            assert getattr(restored, item.name) == getattr(state, item.name), item.name
    assert [restored.rng.random() for _ in range(3)] == [state.rng.random() for _ in range(3)]


def test_a_checkpoint_from_before_a_field_gets_its_default() -> None:
    old = TrainerState.fresh(seed=1, source="real").to_json()
    for name in ("best_fidelity", "source", "switched_at", "drift", "last_fidelity"):
        old.pop(name)
    restored = TrainerState.from_json(old, default_source="cache")
    assert restored.source == "cache" and restored.best_fidelity is None and restored.drift is False


def test_saved_lists_are_copies() -> None:
    state = TrainerState.fresh(seed=0, source="real")
    state.data_order.append(5)
    saved = state.to_json()
    state.data_order.append(6)
    assert saved["data_order"] == [5]
