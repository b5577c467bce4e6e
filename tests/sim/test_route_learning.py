"""The route table as sim's stage: cross-fitted folds reuse the build's candidates, and a fold's book holds nothing
the held-out fold showed (its evidence, the candidates only it formed, the support and statuses it would add)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from helpers import sample_episodes
from worldsmith.sim import SIMULATOR_STAGES, build_simulator_book, route_learning
from worldsmith.sim.route_learning import fold_book, route_budget, route_fold_assignment, route_sample, simulator_stages
from worldsmith.traces import Action, Episode, Observation, Turn, trajectory_family
from worldsmith.traces.model import turn_id
from worldsmith.worldbook import BuildConfig, build_worldbook
from worldsmith.worldbook.book_stages import BOOK_STAGES
from worldsmith.worldbook.build import families_in_fold_order, family_folds
from worldsmith.worldbook.induce import episode_of


def _copy(episode: Episode, suffix: str) -> Episode:
    """The same trajectory under a new id, in the same family (so in the same fold)."""
    new_id = f"{episode.id}-{suffix}"
    return episode.model_copy(update={"id": new_id, "family": trajectory_family(episode), "turns": [
        turn.model_copy(update={"id": turn_id(new_id, turn.index)}) for turn in episode.turns]})


def _planted(family: str) -> Episode:
    """An episode of an action no other trajectory takes, answered the same way every time."""
    turns = [Turn(index=i, id=turn_id("planted", i), action=Action(name="xyzzy", raw="xyzzy"),
                  observation=Observation(text="A hollow voice says: fool.")) for i in range(6)]
    return Episode(id="planted", env_id="alfworld", family=family, turns=turns)


def _fold(episodes: list[Episode], fold: int = 0) -> tuple[set[str], set[str]]:
    """(kept episode ids, held-out episode ids) of a 3-fold split by family."""
    assignment = family_folds(episodes, 3)
    held = {e.id for e in episodes if assignment[trajectory_family(e)] == fold}
    return {e.id for e in episodes} - held, held


def _fold_book_of(episodes: list[Episode], kept: set[str]) -> Any:
    artifacts = build_worldbook(episodes, name="alf").artifacts
    assert artifacts is not None
    return fold_book(artifacts["evidence"], artifacts["rules"].deterministic, kept, BuildConfig())


def _reviewed(book: Any) -> dict[tuple[str, str], tuple[str, int, list[str]]]:
    return {(r.action, r.template): (r.status.value, r.support, sorted(r.counterexamples)) for r in book.rules}


def test_a_fold_book_holds_no_held_out_evidence_candidate_or_support() -> None:
    base = sample_episodes("alfworld_expert")
    kept, held = _fold(base)
    held_family = trajectory_family(next(e for e in base if e.id in held))
    # The held-out fold, made louder: every held-out trajectory three times, and an action only it takes.
    louder = [*base, *(_copy(e, f"dup{k}") for e in base if e.id in held for k in (1, 2)), _planted(held_family)]
    assert _fold(louder) == (kept, held | {e.id for e in louder if e.id not in kept})
    quiet_book, loud_book = _fold_book_of(base, kept), _fold_book_of(louder, kept)

    for book in (quiet_book, loud_book):
        assert {episode_of(item.turn_id) for item in book.evidence} == kept
        kept_turns = {item.turn_id for item in book.evidence}
        for rule in book.rules:
            cited = {*rule.provenance.supporting, *rule.provenance.contradicting, *rule.counterexamples}
            assert cited <= kept_turns, rule.id
    assert "xyzzy" not in {r.action for r in loud_book.rules}
    assert loud_book.action_schema.get("xyzzy") is None
    # Support and statuses are counted on the kept folds alone: tripling the held-out fold changes none of them.
    assert _reviewed(loud_book) == _reviewed(quiet_book)
    assert loud_book.evidence == quiet_book.evidence
    assert any(status == "supported" for status, _, _ in _reviewed(quiet_book).values())


def test_the_simulator_book_is_the_book_with_its_route_table() -> None:
    episodes = sample_episodes("textworld")
    book = build_worldbook(episodes, name="tw").book
    simulated = build_simulator_book(episodes, name="tw")
    assert list(simulated.timings) == [*[s.name for s in BOOK_STAGES[:-1]], "routes", "compile"]
    assert simulated.book.routes is not None and simulated.book.routes.turns == sum(len(e.turns) for e in episodes)
    assert simulated.book.model_copy(update={"routes": None}) == book
    assert build_simulator_book(episodes, name="tw", route_folds=0).book == book
    assert simulator_stages(0) == BOOK_STAGES and SIMULATOR_STAGES == simulator_stages(5)


def _episode(task: str, actions: list[str]) -> Episode:
    turns = [Turn(index=i, id=turn_id(task, i), action=Action(name=name, raw=name),
                  observation=Observation(text=f"{name} done.")) for i, name in enumerate(actions)]
    return Episode(id=task, env_id="toy", task_id=task, turns=turns)


def test_the_route_sample_is_every_family_within_the_budget() -> None:
    episodes = [_episode(f"t{i}", ["look", "take"]) for i in range(10)]
    assert route_sample(episodes, max_turns=20) is None and route_sample(episodes, max_turns=None) is None
    assert route_fold_assignment(episodes, 5, max_turns=20) == family_folds(episodes, 5)


def test_past_the_budget_a_prefix_of_fold_order_plus_the_families_of_rare_actions() -> None:
    episodes = [_episode(f"t{i}", ["look", "take"]) for i in range(100)]
    episodes += [_episode(f"rare{i}", ["look", "xyzzy"]) for i in range(4)]
    order = families_in_fold_order(episodes)
    sample = route_sample(episodes, max_turns=40, min_action_turns=3)
    assert sample is not None
    budgeted = [f for f in sample if not f.startswith("rare")]
    assert len(budgeted) <= 20 and budgeted == [f for f in order if f in set(budgeted)]
    assert budgeted == [f for f in order if not f.startswith("rare")][: len(budgeted)]
    assert sum(f.startswith("rare") for f in sample) >= 3  # a rare action is measured on at least 3 turns
    assert sample == [f for f in order if f in set(sample)]


def test_sampled_folds_keep_each_fold_book_at_least_as_large_as_a_full_cross_fit() -> None:
    episodes = [_episode(f"t{i}", ["look", "take"]) for i in range(100)]
    few = route_fold_assignment(episodes, 5, max_turns=40)  # 20 of 100 families: one held-out split
    assert set(few.values()) == {0} and len(few) == 20
    more = route_fold_assignment(episodes, 5, max_turns=120)  # 60 of 100: 3 folds of 20 (a 5-fold holds out 20)
    assert set(more.values()) == {0, 1, 2} and len(more) == 60
    assert max(Counter(more.values()).values()) <= 20


def test_a_sampled_route_table_replays_only_the_sample() -> None:
    episodes = sample_episodes("alfworld_expert")
    turns = sum(len(e.turns) for e in episodes)
    full = build_simulator_book(episodes, name="alf", route_turns=None).book
    assert full.routes is not None and full.routes.turns == turns and full.routes.folds == 5
    assert build_simulator_book(episodes, name="alf").book == full  # within the default budget: the same book
    sampled_result = build_simulator_book(episodes, name="alf", route_turns=turns // 3)
    sampled = sampled_result.book
    assert sampled.routes is not None and turns // 3 <= sampled.routes.turns < turns
    # what the table measures (routes, and the held-out test of `worldbook.holdout`: statuses, demotions) aside,
    # the same book: the reviewed rules are the full table's
    full_result = build_simulator_book(episodes, name="alf", route_turns=None)
    assert sampled_result.artifacts is not None and full_result.artifacts is not None
    assert sampled_result.artifacts["reviewed"] == full_result.artifacts["reviewed"]
    measured = {"routes": None, "rules": [], "tool_rules": [], "demotions": []}
    assert sampled.model_copy(update=measured) == full.model_copy(update=measured)


def test_the_route_budget_is_a_share_of_the_construction_between_a_floor_and_a_cap() -> None:
    assert route_budget(2_000) == 3_000 and route_budget(8_000) == 3_200  # the floor, then 40%
    assert route_budget(25_000) == 10_000 and route_budget(80_000) == 12_000 and route_budget(80_000, None) == 80_000
    assert route_budget(80_000, 500) == 500


def test_route_folds_in_two_processes_make_the_one_process_book_byte_for_byte(monkeypatch: Any) -> None:
    """Each fold's table is made alone and the tables are merged in fold order: a pool of worker processes gives the
    same book, route table key order included, as one process (the pool's size floor lowered to these samples)."""
    monkeypatch.setattr(route_learning, "MIN_POOL_TURNS", 0)
    for sample in ("alfworld_expert", "bfcl_curious"):
        episodes = sample_episodes(sample)
        serial = build_simulator_book(episodes, name=sample, workers=1).book
        parallel = build_simulator_book(episodes, name=sample, workers=2).book
        assert serial.routes is not None and serial.routes.folds >= 2 and serial.routes.turns > 0
        assert parallel.model_dump_json() == serial.model_dump_json()
