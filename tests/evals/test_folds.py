"""Cross-fitted evaluation (`EvalConfig.folds`): folds dealt by family as `cross_fit` deals them, each fold's book
built from the others and evaluated on its own episodes only, records pooled, resumed, and refused when misused."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from worldsmith.evals import EvalConfig, RunConflictError, run_eval
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import trajectory_family
from worldsmith.worldbook.build import family_folds


def _config(**extra) -> EvalConfig:
    return EvalConfig(**{"name": "alf-folds", "dataset": "alf", "folds": 3, "methods": ["harness", "nearest"],
                         "max_turns": 3, "resamples": 200, **extra})


def test_each_fold_is_evaluated_with_a_book_built_from_the_other_folds(sample, tmp_path: Path) -> None:
    episodes = sample("alfworld_expert")
    said: list[str] = []
    run = run_eval(_config(), tmp_path / "ws", episodes=episodes, progress=lambda _d, _t, what: said.append(what))
    assignment = family_folds(episodes, 3)
    by_id = {e.id: e for e in episodes}
    folds = run.records.groupby("episode_id")["fold"].first()
    assert {e: assignment[trajectory_family(by_id[e])] + 1 for e in folds.index} == folds.to_dict()
    assert set(folds) == {1, 2, 3} and len(folds) == len(episodes)
    assert not run.records["task_seen"].any()  # a fold's families are never in its book

    summary = run.report.folds
    assert [f.fold for f in summary] == [1, 2, 3] and all(f.leakage_ok for f in summary)
    assert all((f.construction_episodes or 0) + (f.episodes or 0) == len(episodes) for f in summary)
    assert [f.book for f in summary] == ["alf-fold1", "alf-fold2", "alf-fold3"]
    leakage = run.report.leakage
    assert leakage.ok and [f.fold for f in leakage.folds] == [1, 2, 3]
    assert leakage.evaluation_episodes == len(episodes)
    assert run.config.book_version.startswith("folds-") and run.report.config["folds"] == 3
    assert "fold 2/3: book built from" in said[1] and said[-1].startswith("fold 3/3: next-obs: nearest on ")
    assert "## Folds" in (run.directory / "report.md").read_text()

    # fold 2 is exactly a plain run of the book built from folds 1 and 3 on fold 2's episodes
    kept = [e for e in episodes if assignment[trajectory_family(e)] != 1]
    held = [e for e in episodes if assignment[trajectory_family(e)] == 1]
    book = build_simulator_book(kept, name="alf-fold2").book
    plain = run_eval(EvalConfig(name="fold-2", book="alf-fold2", dataset="alf", methods=["harness", "nearest"],
                                max_turns=3, resamples=200), tmp_path / "ws", book=book, episodes=held,
                     construction=kept)
    columns = ["protocol", "method", "episode_id", "turn", "prediction", "exact_match", "novel"]
    mine = run.records[run.records["fold"] == 2][columns].sort_values(columns[:4]).reset_index(drop=True)
    assert mine.equals(plain.records[columns].sort_values(columns[:4]).reset_index(drop=True))

    again = run_eval(_config(), tmp_path / "ws", episodes=episodes)
    assert again.computed == 0 and again.reused == 2 * 2 * len(episodes)  # methods x protocols
    assert again.fingerprint == run.fingerprint
    with pytest.raises(RunConflictError):
        run_eval(_config(folds=2), tmp_path / "ws", episodes=episodes)


def test_cross_fitting_settings_are_checked(sample, tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="at least 2"):
        _config(folds=1)
    with pytest.raises(ValidationError, match="set book"):
        EvalConfig(name="x", dataset="alf")
    with pytest.raises(ValidationError, match="builds its own"):
        _config(book="alf", book_version="v0001")
    episodes = sample("alfworld_expert")
    with pytest.raises(ValueError, match="neither book nor construction"):
        run_eval(_config(), tmp_path / "ws", episodes=episodes, construction=episodes)
    with pytest.raises(ValueError, match="cannot fill 40 folds"):
        run_eval(_config(folds=40), tmp_path / "ws", episodes=episodes)
