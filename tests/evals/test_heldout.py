"""The held-out delta of the curation loop, on a book built from the bundled ALFWorld expert episodes' train split:
a hand-made edit that breaks a rule shows broken flips and a negative delta, its undo the reverse, from the cache."""

from __future__ import annotations

import pytest

from helpers import sample_episodes
from worldsmith.evals import HeldOut, LeakageError
from worldsmith.evals.heldout import CACHE_KIND, book_hash, edited_actions, heldout_delta, score_version
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.workspace import Workspace
from worldsmith.worldbook import Worldbook

NAME = "alfworld_expert"


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, Worldbook, HeldOut]:
    ws = Workspace(tmp_path_factory.mktemp("heldout"))
    ws.add_episodes(NAME, sample_episodes(NAME))
    ws.split(NAME, {"train": 0.75, "test": 0.25})
    book = build_simulator_book(ws.dataset(NAME).iter_episodes("train"), name=NAME).book
    return ws, book, HeldOut(dataset=NAME, split="test")


def broken(book: Worldbook, rule_id: str) -> Worldbook:
    rules = [r.model_copy(update={"template": "Nothing at all happens."}) if r.id == rule_id else r for r in book.rules]
    return book.model_copy(update={"rules": rules})


def best_rule(book: Worldbook, action: str = "go") -> str:
    return max((r for r in book.rules if r.action == action), key=lambda r: r.support).id


def test_breaking_a_rule_shows_broken_turns_and_a_negative_delta(loop) -> None:
    ws, book, heldout = loop
    rule_id = best_rule(book)
    after = broken(book, rule_id)
    delta = heldout_delta(book, after, heldout, ws)
    assert delta.actions == ["go"]
    assert delta.metrics["exact_match"].before > 0, "the built book must get some held-out turns right"
    assert delta.metrics["exact_match"].diff < 0
    assert delta.metrics["exact_match"].low <= delta.metrics["exact_match"].diff <= delta.metrics["exact_match"].high
    assert delta.metrics["token_f1"].diff < 0
    go = delta.by_action["go"]["exact_match"]
    assert go.diff < 0 and go.n < delta.turns
    assert delta.broken and not delta.fixed
    for turn in delta.broken:
        assert turn.action == "go" and turn.before == turn.target and turn.after == "Nothing at all happens."
    assert delta.turns == sum(len(e.turns) for e in ws.dataset(NAME).iter_episodes("test"))
    assert "broken" in delta.summary() and delta.leakage.ok
    # open loop too (the headline): the broken rule answers the harness's own path worse as well
    assert delta.open_loop["exact_match"].diff < 0 and delta.open_loop["exact_match"].n == delta.turns
    assert delta.summary().index("open loop exact match") < delta.summary().index("teacher forced exact match")
    source = delta.provenance  # what produced the teacher-forced numbers
    assert source is not None and source.method == "harness" and source.model == "none"
    assert source.dataset == NAME and source.split == "test" and source.n == delta.turns
    assert source.episodes == delta.episodes and source.dataset_digest == str(ws.dataset(NAME).revision)
    assert source.run is not None and book_hash(after)[:8] in source.run


def test_undo_shows_the_reverse_from_the_cache(loop) -> None:
    ws, book, heldout = loop
    after = broken(book, best_rule(book))
    forward = heldout_delta(book, after, heldout, ws)
    undo = heldout_delta(after, book, heldout, ws)
    assert undo.computed == []  # both versions were scored already
    assert undo.metrics["exact_match"].diff == pytest.approx(-forward.metrics["exact_match"].diff)
    assert [t.turn_id for t in undo.fixed] == [t.turn_id for t in forward.broken] and not undo.broken
    assert all(t.after == t.target for t in undo.fixed)


def test_only_the_new_version_is_computed(loop) -> None:
    ws, book, heldout = loop
    score_version(book, heldout, ws)
    edited = broken(book, best_rule(book, "open") if any(r.action == "open" for r in book.rules) else best_rule(book))
    edited = edited.model_copy(update={"description": "another version"})
    delta = heldout_delta(book, edited, heldout, ws)
    assert delta.computed == ["after"]


def test_a_damaged_cache_file_is_recomputed(loop) -> None:
    ws, book, heldout = loop
    first = score_version(book, heldout, ws)
    files = list(ws.layout.cache_dir(CACHE_KIND).rglob(f"{book_hash(book)}-*.json"))
    assert len(files) == 1
    files[0].write_text("{not json")
    again = score_version(book, heldout, ws)
    assert not again.cached and [t.prediction for t in again.turns] == [t.prediction for t in first.turns]
    assert score_version(book, heldout, ws).cached


def test_held_out_episodes_in_the_evidence_are_refused(loop) -> None:
    ws, book, _ = loop
    train_ids = tuple(sorted(e.id for e in ws.dataset(NAME).iter_episodes("train")))[:2]
    with pytest.raises(LeakageError, match="leak"):
        heldout_delta(book, book, HeldOut(dataset=NAME, episodes=train_ids), ws)


def test_bad_held_out_sets_are_named(loop) -> None:
    ws, book, _ = loop
    with pytest.raises(ValueError, match="split or an episode list"):
        HeldOut(dataset=NAME)
    with pytest.raises(ValueError, match="no split 'dev'"):
        score_version(book, HeldOut(dataset=NAME, split="dev"), ws)
    with pytest.raises(ValueError, match="not in dataset"):
        score_version(book, HeldOut(dataset=NAME, episodes=("nope",)), ws)


def test_edited_actions_are_those_of_added_removed_and_changed_rules(loop) -> None:
    _, book, _ = loop
    go, other = best_rule(book), next(r for r in book.rules if r.action != "go")
    assert edited_actions(book, book) == []
    assert edited_actions(book, broken(book, go)) == ["go"]
    removed = book.model_copy(update={"rules": [r for r in book.rules if r.id != other.id]})
    assert edited_actions(book, removed) == [other.action]
    assert edited_actions(removed, book) == [other.action]
