"""The uncertainty signal (`sim.uncertainty`) on books the product builds from the bundled samples."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from sim_support import sample_episodes

from worldsmith.sim import Harness, NearestEvidence, Uncertainty, assess, rank_actions
from worldsmith.sim.uncertainty import (
    CONFLICTED,
    NEAREST,
    NOTHING,
    STATE,
    SUPPORTED,
    TENTATIVE,
    book_counts,
    expected_error,
    information,
    situation,
)
from worldsmith.worldbook import BuildConfig, Worldbook, build_worldbook
from worldsmith.worldbook.route_table import RouteStats, RouteTable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def alf_book() -> Worldbook:
    return build_worldbook(sample_episodes("alfworld"), name="alf").book


@pytest.fixture
def alf(alf_book: Worldbook) -> Harness:
    harness = Harness(alf_book)
    episode = sample_episodes("alfworld")[0]
    harness.start(episode.model_copy(update={"turns": episode.turns[:3]}))
    return harness


def _supported_line(harness: Harness) -> str:
    """A recorded action line the fast path answers with a supported rule in the harness's state."""
    for item in harness.book.evidence:
        if harness.predict(item.action_text).audit.source == "rule":
            return item.action_text
    raise AssertionError("no recorded action is answered by a supported rule")


def test_a_supported_rule_action_scores_lower_than_an_unseen_action(alf: Harness) -> None:
    line = _supported_line(alf)
    known, unseen = assess(alf, line), assess(alf, "frobnicate the purple unicorn")
    assert known.source == "rule" and known.rule_status == "supported" and known.rules
    assert known.evidence >= 2 and known.action_seen >= known.evidence
    assert unseen.action_seen == 0 and unseen.feature_seen == 0 and unseen.rule_status is None
    assert unseen.score > known.score + 0.3
    assert "never seen" in unseen.reason and "supported rule" in known.reason


def test_assess_never_changes_history_state_or_the_pending_prediction(alf: Harness) -> None:
    line = _supported_line(alf)
    pending = alf.predict(line)
    history, state = list(alf.history), copy.deepcopy(alf.state)
    for action in ("frobnicate the purple unicorn", line, "go to drawer 9", "look"):
        assess(alf, action)
    rank_actions(alf, ["inventory", line])
    assert alf.history == history and alf.state == state
    assert alf.pending is not None and alf.pending[1] == pending
    alf.commit()  # what was predicted before the assessments is what is committed
    assert alf.history[-1].observation == pending.observation and len(alf.history) == len(history) + 1


def test_rank_actions_is_highest_first_and_stable_for_ties(alf: Harness) -> None:
    line = _supported_line(alf)
    actions = [line, "frobnicate the purple unicorn", "xyzzy plover", line]
    ranked = rank_actions(alf, actions)
    assert [u.score for u in ranked] == sorted((u.score for u in ranked), reverse=True)
    assert [u.action for u in ranked][:2] == ["frobnicate the purple unicorn", "xyzzy plover"]  # a tie: given order
    assert ranked[0].score == ranked[1].score
    assert all(isinstance(u, Uncertainty) for u in ranked) and len(ranked) == 4


def test_the_score_orders_sources_and_decays_with_evidence_and_novelty() -> None:
    assert information(NOTHING, 0, 0, 0) == 1.0
    levels = [NOTHING, NEAREST, STATE, CONFLICTED, TENTATIVE, SUPPORTED]
    assert levels == sorted(levels, reverse=True)
    scores = [information(level, 3, 5, 2) for level in levels]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == len(scores)
    for count in range(6):
        base = information(NEAREST, count, count, count)
        assert information(NEAREST, count + 1, count, count) < base
        assert information(NEAREST, count, count + 1, count) < base
        assert information(NEAREST, count, count, count + 1) < base
        assert 0.0 < base <= 1.0
    assert information(SUPPORTED, 10_000, 10_000, 10_000) < 0.06
    with pytest.raises(ValueError, match="answer level"):
        information(1.5, 0, 0, 0)


def test_expected_error_moves_from_the_source_level_to_the_measured_error() -> None:
    assert expected_error(SUPPORTED, None) == SUPPORTED
    assert expected_error(SUPPORTED, RouteStats()) == SUPPORTED
    assert expected_error(SUPPORTED, RouteStats(proposed=4, exact=4)) < SUPPORTED
    wrong = [expected_error(SUPPORTED, RouteStats(proposed=n, exact=n // 10)) for n in (1, 10, 100, 1000)]
    assert wrong == sorted(wrong) and wrong[0] > SUPPORTED and abs(wrong[-1] - 0.9) < 0.01
    assert expected_error(NEAREST, RouteStats(proposed=6, exact=3)) == pytest.approx(1 - (3 + 4 * 0.2) / 10)


def _with_rule_measured(book: Worldbook, name: str, proposed: int, exact: int) -> Harness:
    """A harness on a copy of `book` whose route table measured the action's rules `exact` of `proposed` held out
    (no wins or losses against nearest evidence, so the rule still answers)."""
    table = RouteTable(folds=5)
    if proposed:
        table.actions[name] = {"rule": RouteStats(proposed=proposed, exact=exact)}
    harness = Harness(book.model_copy(update={"routes": table}))
    episode = sample_episodes("alfworld")[0]
    harness.start(episode.model_copy(update={"turns": episode.turns[:3]}))
    return harness


def test_a_supported_rule_measured_wrong_held_out_scores_higher_than_one_measured_right(
        alf: Harness, alf_book: Worldbook) -> None:
    line = _supported_line(alf)
    name = assess(alf, line).name
    wrong = assess(_with_rule_measured(alf_book, name, 20, 2), line)
    right = assess(_with_rule_measured(alf_book, name, 20, 20), line)
    unmeasured = assess(_with_rule_measured(alf_book, name, 0, 0), line)
    for item in (wrong, right, unmeasured):
        assert item.source == "rule" and item.rule_status == "supported" and item.level == SUPPORTED
    assert (wrong.measured, wrong.measured_exact, right.measured) == (20, 2, 20)
    assert wrong.score > unmeasured.score > right.score and wrong.score > right.score + 0.3
    assert "exact on 2 of 20 held-out turns" in wrong.reason
    assert unmeasured.measured == 0 and unmeasured.expected_error == SUPPORTED  # no stats: the source level
    assert unmeasured.score == information(SUPPORTED, unmeasured.evidence, unmeasured.action_seen,
                                           unmeasured.feature_seen)


def test_the_situation_signature_reads_the_preceding_observation_and_repeats() -> None:
    assert situation("take", {"object": "Key", "n": 2}, "You see a key.", False) == "take|n=new,object=shown|first"
    assert situation("look", {}, "", True) == "look||repeat"
    assert situation("call", {"filters": {"a": 1}, "flag": True}, "a", False) == "call||first"  # scalars only


def test_book_counts_count_names_lines_and_situations(alf_book: Worldbook) -> None:
    counts = book_counts(alf_book)
    assert counts is book_counts(alf_book)  # kept for the book
    grown = alf_book.model_copy(deep=True)
    assert book_counts(grown) is not counts and book_counts(grown).by_name == counts.by_name
    grown.evidence.append(grown.evidence[0].model_copy(update={"turn_id": "new-episode#0"}))
    assert book_counts(grown).by_name[grown.evidence[0].action] == counts.by_name[grown.evidence[0].action] + 1
    assert sum(counts.by_name.values()) == sum(counts.by_situation.values()) == len(alf_book.evidence)
    go = [item for item in alf_book.evidence if item.action == "go"]
    assert counts.by_name["go"] == len(go) and counts.by_line[go[0].action_text] >= 1


def test_a_tentative_rule_that_holds_lowers_a_weaker_answer() -> None:
    book = build_worldbook(sample_episodes("textworld_curious"), name="tw").book
    harness = Harness(book)
    harness.start(sample_episodes("textworld_curious")[0].model_copy(update={"turns": []}))
    held = [u for u in rank_actions(harness, sorted({e.action_text for e in book.evidence}))
            if u.source != "rule" and u.rule_status in ("tentative", "conflicted")]
    assert held, "no tentative or conflicted rule holds for any recorded action at the opening"
    for item in held:
        assert item.rules and f"{item.rule_status} rule holds here" in item.reason
        assert item.level <= CONFLICTED  # the hypothesis lowers the prior; measured turns move it
        if item.measured == 0:
            assert item.score <= information(STATE, item.evidence, item.action_seen, item.feature_seen) + 1e-9


def test_tool_calls_on_the_toolshop_book() -> None:
    from benchmarks.fidelity import _read

    episodes = [e for name in ("expert.jsonl", "probing.jsonl")
                for e in _read(str(ROOT / "data_samples" / "toolshop" / name))]
    harness = Harness(build_worldbook(episodes, name="toolshop", config=BuildConfig()).book)
    episode = episodes[0]
    harness.start(episode.model_copy(update={"turns": episode.turns[:2]}))
    calls = [turn.action for episode in episodes[:3] for turn in episode.turns]
    ranked = rank_actions(harness, [*calls, {"name": "launch_rocket", "arguments": {"to": "mars"}}])
    assert ranked[0].action.startswith("launch_rocket") and ranked[0].action_seen == 0
    known = [u for u in ranked if u.rule_status == "supported"]
    assert known and max(u.score for u in known) < ranked[0].score
    assert all(u.name for u in ranked) and len(harness.history) == 2


def test_any_world_model_with_a_book_is_assessed(alf_book: Worldbook) -> None:
    model = NearestEvidence(alf_book)
    model.start("You are in the middle of a room.")
    seen = assess(model, alf_book.evidence[0].action_text)
    unseen = assess(model, "frobnicate the purple unicorn")
    assert seen.action_seen > 0 and unseen.action_seen == 0 and unseen.score > seen.score
    assert model.history == [] and model.pending is None
