"""Leakage control: planted leaks are refused before anything runs; a held-out split by family passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from worldsmith.evals import EvalConfig, LeakageError, run_eval
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode, Observation
from worldsmith.worldbook import Evidence, Worldbook
from worldsmith.worldbook.leakage import check_leakage


def _renamed(episode: Episode, new_id: str, turns: int | None = None) -> Episode:
    """A copy under another id (turn ids follow), optionally cut to its first `turns` turns."""
    data = episode.model_dump(mode="json")
    data["turns"] = [{**turn, "id": ""} for turn in data["turns"][:turns]]
    return Episode.model_validate({**data, "id": new_id})


def _config(name: str) -> EvalConfig:
    return EvalConfig(name=name, book="alfworld", dataset="inline", methods=["nearest"], resamples=200)


def test_a_family_split_is_not_leakage(alfworld_split, alfworld_book: Worldbook) -> None:
    construction, held_out = alfworld_split
    report = check_leakage(alfworld_book, held_out, construction=construction)
    assert report.ok and report.builder_check is not None and report.builder_check.ok
    assert report.target_turns == sum(len(e.turns) for e in held_out)
    assert not report.shared_episodes and not report.leaked_turns and not report.duplicated_trajectories


def test_a_planted_episode_is_refused_and_nothing_runs(alfworld_split, tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    planted = held_out[2]
    book = build_simulator_book([*construction, planted], name="alfworld").book
    with pytest.raises(LeakageError, match="evaluated episodes are in the book's evidence") as caught:
        check_leakage(book, held_out)
    assert caught.value.report.shared_episodes == [planted.id]
    assert caught.value.report.leaked_turns[0].startswith(planted.id + "#")
    with pytest.raises(LeakageError):
        run_eval(_config("leaky"), tmp_path / "ws", book=book, episodes=held_out)
    assert not (tmp_path / "ws" / "runs" / "eval" / "leaky").exists()


def test_a_planted_target_turn_is_refused(alfworld_split, alfworld_book: Worldbook) -> None:
    _, held_out = alfworld_split
    target = held_out[0].turns[1]
    evidence = Evidence(turn_id=target.id, action=target.action.name, action_text=target.action.raw or "",
                        observation=target.observation.text)
    book = alfworld_book.model_copy(update={"evidence": [*alfworld_book.evidence, evidence]})
    with pytest.raises(LeakageError, match="target turns") as caught:
        check_leakage(book, held_out)
    assert caught.value.report.leaked_turns == [target.id]


def test_a_trajectory_copied_under_another_id_is_refused(alfworld_split) -> None:
    construction, held_out = alfworld_split
    copy = _renamed(held_out[1], "renamed-copy")
    truncated = _renamed(held_out[3], "renamed-truncated")
    book = build_simulator_book([*construction, copy, truncated], name="alfworld").book
    evaluated = [held_out[1], held_out[3].model_copy(update={"turns": held_out[3].turns[:2]})]
    with pytest.raises(LeakageError, match="under another id") as caught:
        check_leakage(book, evaluated)
    duplicated = caught.value.report.duplicated_trajectories
    assert duplicated == sorted([f"{held_out[1].id} = renamed-copy",
                                 f"{held_out[3].id} = renamed-truncated (its first 2 turns)"])


def test_construction_episodes_are_checked_with_the_builder_check(alfworld_split, alfworld_book: Worldbook) -> None:
    construction, held_out = alfworld_split
    with pytest.raises(LeakageError, match="construction episodes share"):
        check_leakage(alfworld_book, held_out, construction=[*construction, held_out[0]])
    report = check_leakage(alfworld_book, held_out, construction=[*construction, held_out[0]], raise_on_leak=False)
    assert not report.ok and report.builder_check is not None
    assert report.builder_check.shared_episodes == [held_out[0].id]
    assert report.leaked_episodes[held_out[0].id] == ["in the construction episodes (the builder's check)"]


def test_a_changed_replay_of_a_construction_game_is_seen_not_leaked(alfworld_split, alfworld_book: Worldbook,
                                                                    tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    source = construction[0]
    turns = [*source.turns[:-1], source.turns[-1].model_copy(update={"observation": Observation(text="Different.")})]
    replayed = _renamed(source.model_copy(update={"turns": turns}), source.id + "-again")
    run = run_eval(_config("seen"), tmp_path / "ws", book=alfworld_book, episodes=[replayed, held_out[0]],
                   construction=construction)
    seen = run.records.groupby("episode_id")["task_seen"].first().to_dict()
    assert seen == {replayed.id: True, held_out[0].id: False}
    assert run.report.seen_unseen["seen"].methods["nearest"]["exact_match"].n == len(replayed.turns)


def test_build_and_eval_flag_the_same_copied_trajectory(alfworld_split) -> None:
    construction, held_out = alfworld_split
    source = construction[0]  # another task whose recording is, verbatim, one the book is built from
    copy = _renamed(source, "another-task").model_copy(update={"task_id": "another/task", "family": "another"})
    built = build_simulator_book(construction, name="alfworld", validation=[copy, held_out[0]])
    assert built.leakage is not None and not built.leakage.ok
    assert built.leakage.leaked_episodes == {"another-task": [f"a copy of {source.id} in the construction episodes"]}
    assert built.leakage.duplicated_trajectories == [f"another-task = {source.id}"]
    with pytest.raises(LeakageError, match="under another id") as caught:
        check_leakage(built.book, [copy, held_out[0]])
    assert caught.value.report.duplicated_trajectories == built.leakage.duplicated_trajectories
    assert caught.value.report.leaked_episodes == {"another-task": [f"a copy of {source.id} in the book's evidence"]}


def test_drop_leaked_evaluates_the_rest_and_names_what_it_dropped(alfworld_split, tmp_path: Path) -> None:
    construction, held_out = alfworld_split
    planted, copied = held_out[2], held_out[4]
    book = build_simulator_book([*construction, planted, _renamed(copied, "renamed-copy")], name="alfworld").book
    evaluated = held_out[:6]
    with pytest.raises(LeakageError):
        run_eval(_config("refused"), tmp_path / "ws", book=book, episodes=evaluated)
    run = run_eval(_config("dropped").model_copy(update={"drop_leaked": True, "max_turns": 2}), tmp_path / "ws",
                   book=book, episodes=evaluated)
    assert set(run.records["episode_id"]) == {e.id for e in evaluated} - {planted.id, copied.id}
    leakage = run.report.leakage
    assert leakage.ok and leakage.evaluation_episodes == 4
    assert leakage.dropped is not None and leakage.dropped.model_dump() == {"count": 2, "episodes": {
        planted.id: ["in the book's evidence", "target turns in the book's evidence"],
        copied.id: ["a copy of renamed-copy in the book's evidence"]}}
    markdown = (run.directory / "report.md").read_text()
    assert "after dropping 2 leaked episodes" in markdown and f"`{copied.id}`" in markdown
    with pytest.raises(LeakageError, match="nothing is left to evaluate"):
        run_eval(_config("all-leak").model_copy(update={"drop_leaked": True}), tmp_path / "ws", book=book,
                 episodes=[planted, copied])


def test_the_check_lives_with_the_worldbook_and_evals_names_the_same_objects() -> None:
    from worldsmith import evals, worldbook
    from worldsmith.worldbook import leakage

    assert evals.LeakageError is leakage.LeakageError  # what an evaluation raises, caught by its callers
    assert leakage.LeakageReport is worldbook.LeakageReport
