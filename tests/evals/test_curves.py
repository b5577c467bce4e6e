"""The construction-size curve on held-out ALFWorld, and the ablation list."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from worldsmith.evals import construction_size_curve
from worldsmith.evals.curves import ablation_methods
from worldsmith.evals.protocols import method_kind
from worldsmith.sim import world_model_names


def test_curve_builds_nested_books_and_evaluates_each_on_the_same_held_out_set(alfworld_split, tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    messages: list[str] = []
    curve = construction_size_curve(construction, held_out[:4], tmp_path / "ws", name="alf-curve", sizes=(1, 5, 40),
                                    max_turns=4, resamples=300, progress=messages.append)
    assert curve.skipped == [40]  # more than the construction episodes
    assert sorted({p["n"] for p in curve.points}) == [1, 5]
    assert {(p["method"], p["metric"]) for p in curve.points} == {
        (m, x) for m in ("harness", "nearest") for x in ("exact_match", "token_f1")}
    records = {p["records"] for p in curve.points}
    assert records == {sum(min(4, len(e.turns)) for e in held_out[:4])}  # the same held-out turns at every size
    assert curve.rules[1] <= curve.rules[5]
    for n in (1, 5):
        report = orjson.loads((Path(curve.runs[n]) / "report.json").read_bytes())
        assert report["leakage"]["ok"] and report["leakage"]["builder_check"]["ok"]
    stored = orjson.loads((tmp_path / "ws" / "runs" / "curves" / "alf-curve" / "curve.json").read_bytes())
    assert stored["skipped"] == [40] and len(stored["points"]) == len(curve.points)
    assert (curve.directory / "plots" / "curve_exact_match.png").exists()
    assert "| 5 |" in (curve.directory / "curve.md").read_text()
    assert any("n=5" in m for m in messages)


def test_ablations_are_world_models() -> None:
    methods = ablation_methods()
    assert methods[0] == "harness" and len(methods) == 5
    assert all(method_kind(m) in world_model_names() for m in methods)
    with pytest.deprecated_call():  # the old names still resolve, with a warning
        assert method_kind("harness-schema") == "harness-no-book" and method_kind("book") == "worldbook-prompt"
