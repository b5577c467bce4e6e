"""Termination learned from `done`: on the bundled TextWorld and ALFWorld samples, thresholds, storage."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import sample_episodes
from worldsmith.worldbook import Evidence, Worldbook, WorldbookStore, build_worldbook
from worldsmith.worldbook.templates import evidence_from_episodes
from worldsmith.worldbook.termination import (
    MIN_PRECISION,
    MIN_SUPPORT,
    Termination,
    learn_termination,
    predicts_done,
    turn_features,
)


def test_textworld_termination_predicts_the_final_turns_of_unseen_games() -> None:
    episodes = sample_episodes("textworld")
    for held in range(len(episodes)):  # learn from the other games, predict this one
        termination = learn_termination(evidence_from_episodes(e for i, e in enumerate(episodes) if i != held))
        assert termination is not None
        assert [(f.kind, f.value) for f in termination.features] == [("line", "*** The End ***")]
        turns = episodes[held].turns
        assert [predicts_done(termination, t.action.name, t.observation.text) for t in turns] == \
            [bool(t.done) for t in turns] == [False] * (len(turns) - 1) + [True]


def test_alfworld_terminations_keep_only_precise_features() -> None:
    assert learn_termination(evidence_from_episodes(sample_episodes("alfworld"))) is None  # endings all differ
    evidence = evidence_from_episodes(sample_episodes("alfworld_expert"))
    termination = learn_termination(evidence)
    assert termination is not None and termination.features[0].value == "You turn on the desklamp #."
    for feature in termination.features:
        assert feature.precision >= MIN_PRECISION and feature.support >= MIN_SUPPORT
        assert set(feature.supporting) <= {e.turn_id for e in evidence if e.done}
    predicted = [e for e in evidence if predicts_done(termination, e.action, e.observation)]
    assert predicted and all(e.done for e in predicted)
    assert termination.precision == 1.0 and termination.recall == round(len(predicted) / termination.done_turns, 4)


def _evidence(rows: list[tuple[str, str, bool | None]]) -> list[Evidence]:
    return [Evidence(turn_id=f"e{index}#0", action=action, action_text=action, observation=observation, done=done)
            for index, (action, observation, done) in enumerate(rows)]


def test_features_are_kept_by_precision_and_support() -> None:
    rows = ([("look", "Game over.", True)] * 19 + [("look", "Game over.", False)]  # precision 0.95: kept
            + [("say", "Bye.", True)] * 9 + [("say", "Bye.", False)]  # 0.9: dropped
            + [("quit", "Once.", True)]  # support 1: dropped
            + [("look", "A room.", False)] * 30 + [("look", "Unlabelled.", None)] * 5)
    termination = learn_termination(_evidence(rows))
    assert termination is not None
    assert [(f.kind, f.value, f.precision, f.support, f.fires) for f in termination.features] == \
        [("line", "Game over.", 0.95, 19, 20)]
    assert termination.labelled_turns == 61 and termination.done_turns == 29
    assert termination.features[0].counterexamples == ["e19#0"]
    assert predicts_done(termination, "anything", "It is 3 pm.\nGame over.\n")
    assert not predicts_done(termination, "say", "Bye.") and not predicts_done(None, "look", "Game over.")
    assert learn_termination(_evidence([("look", "A room.", False)] * 3)) is None  # nothing ever ended
    assert learn_termination(_evidence([("look", "A room.", None)] * 3)) is None  # nothing recorded


def test_candidate_features_write_digits_and_whitespace_alike() -> None:
    assert turn_features("score", "  You scored 5 out of   5.\n\n") == {
        ("line", "You scored # out of #."), ("last_line", "You scored # out of #."), ("action", "score")}


def test_termination_is_a_cached_build_stage_and_is_stored(tmp_path: Path) -> None:
    episodes = sample_episodes("textworld")
    first = build_worldbook(episodes, name="tw", cache_dir=tmp_path / "cache")
    again = build_worldbook(episodes, name="tw", cache_dir=tmp_path / "cache")
    assert isinstance(first.book.termination, Termination) and again.book.termination == first.book.termination
    assert again.stage_reports["termination"]["cached"] is True
    store = WorldbookStore(tmp_path / "worldbooks")
    version = store.save(first.book).version
    assert store.load("tw", version).termination == first.book.termination


def test_book_show_names_what_ends_an_episode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from worldsmith.cli.main import main

    book = build_worldbook(sample_episodes("textworld"), name="tw").book
    WorldbookStore(tmp_path / "worldbooks").save(book)
    assert main(["book", "show", "tw", "--workspace", str(tmp_path), "--json"]) == 0
    shown = orjson.loads(capsys.readouterr().out)
    assert shown["termination"] == [{"kind": "line", "value": "*** The End ***", "precision": 1.0, "support": 4}]
    assert main(["book", "show", "tw", "--workspace", str(tmp_path)]) == 0
    assert "episodes end on: line '*** The End ***' (precision 1.00, 4 done turns)" in capsys.readouterr().out


def test_books_without_done_or_termination_dump_as_before() -> None:
    """A version written before these fields existed must hash the same when loaded again."""
    item = Evidence(turn_id="e#0", action="look", action_text="look", observation="A room.")
    assert "done" not in item.model_dump(mode="json")
    assert not {"termination", "routes"} & set(Worldbook(name="old").model_dump(mode="json"))
    assert Evidence.model_validate(item.model_dump(mode="json")) == item
