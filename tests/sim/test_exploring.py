"""The exploring policy (`sim.exploring`) in real environments: a tw-make TextWorld game and the toolshop API."""

from __future__ import annotations

from pathlib import Path

import pytest
from sim_support import sample_episodes

from worldsmith.envs import CuriousPolicy, ExpertPolicy, make, record_episode
from worldsmith.envs.probing import ProbingPolicy
from worldsmith.sim import ExploringPolicy, Uncertainty
from worldsmith.traces import Episode
from worldsmith.worldbook import BuildConfig, Worldbook, build_worldbook

ROOT = Path(__file__).resolve().parents[2]
COOKING = "cooking:recipe=2,take=1,go=6,open,cut:seed=11"  # a 14-step walkthrough, made by tw-make (~15 s)
SHOP_TASKS = [f"db=0:task={index}" for index in range(6)]
# An assessment at least this high: the book is unsure. In the TextWorld book most actions have a tentative or
# conflicted rule that holds (scores 0.25-0.35 where seen often); in the toolshop book most tools are answered by
# nearest evidence only (0.4-0.6), so a high score there is an unseen tool or situation.
TW_UNSURE, SHOP_UNSURE = 0.4, 0.6


def _share_unsure(assessments: list[Uncertainty | None], threshold: float) -> float:
    scored = [item.score for item in assessments if item is not None]
    return sum(score >= threshold for score in scored) / len(scored)


def _actions(episode: Episode) -> list[str]:
    return [turn.action.raw or turn.action.name for turn in episode.turns]


# ---------------------------------------------------------------------------------------------- TextWorld


@pytest.fixture(scope="module")
def textworld(tmp_path_factory: pytest.TempPathFactory):
    pytest.importorskip("textworld", reason="textworld is not installed (pip install 'worldsmith[envs]')")
    env = make("textworld", games_dir=str(tmp_path_factory.mktemp("tw-games")))
    env.game_path(COOKING)  # tw-make once for the module
    yield env
    env.close()


@pytest.fixture(scope="module")
def tw_book() -> Worldbook:
    return build_worldbook(sample_episodes("textworld_curious"), name="tw").book


def _play(env, policy, task: str, max_steps: int = 60) -> Episode:
    return record_episode(env, policy, task, max_steps=max_steps, seed=0)


def test_textworld_episodes_reach_the_end_and_explore_what_the_book_is_unsure_of(textworld, tw_book) -> None:
    expert = ExploringPolicy(tw_book, seed=0, explore=0.0)
    baseline = _play(textworld, expert, COOKING)
    assert set(expert.choices) == {"expert"} and baseline.success
    assert _actions(baseline) == _actions(_play(textworld, ExpertPolicy(), COOKING))  # explore=0: the expert
    shares, explored = [], 0
    for seed in (0, 1, 2):
        policy = ExploringPolicy(tw_book, seed=seed, explore=0.5)
        episode = _play(textworld, policy, COOKING)
        assert episode.metadata.get("error") is None and episode.metadata["terminated"]  # it got to the end
        assert len(policy.choices) == len(policy.assessments) == len(episode.turns) > len(baseline.turns)
        assert {"expert", "explore"} <= set(policy.choices)
        assert all(count <= 48 + 12 for count in policy.candidate_counts)
        explored += policy.choices.count("explore")
        shares.append(_share_unsure(policy.assessments, TW_UNSURE))
    assert explored >= 6
    assert min(shares) > _share_unsure(expert.assessments, TW_UNSURE)


def test_textworld_is_deterministic_for_a_seed_and_greedy_at_one(textworld, tw_book) -> None:
    first = _play(textworld, ExploringPolicy(tw_book, seed=7, explore=0.5), COOKING)
    again = _play(textworld, ExploringPolicy(tw_book, seed=7, explore=0.5), COOKING)
    assert _actions(first) == _actions(again)
    greedy = ExploringPolicy(tw_book, seed=7, explore=1.0)
    _play(textworld, greedy, COOKING, max_steps=8)
    assert set(greedy.choices) == {"explore"} and all(item is not None for item in greedy.assessments)
    assert _share_unsure(greedy.assessments, TW_UNSURE) >= 0.5


# ---------------------------------------------------------------------------------------------- toolshop


@pytest.fixture(scope="module")
def toolshop():
    return make("toolshop")


@pytest.fixture(scope="module")
def shop_book() -> Worldbook:
    from benchmarks.fidelity import _read

    episodes = _read(str(ROOT / "data_samples" / "toolshop" / "expert.jsonl"))
    return build_worldbook(episodes, name="shop", config=BuildConfig()).book


def test_toolshop_episodes_finish_their_tasks_while_probing_the_unsure(toolshop, shop_book) -> None:
    expert = ExploringPolicy(shop_book, seed=0, explore=0.0)
    policy = ExploringPolicy(shop_book, seed=0, explore=0.5)
    expert_share, shares, finished, assessed = [], [], 0, 0
    for task in SHOP_TASKS:
        baseline = _play(toolshop, expert, task, max_steps=40)
        assert _actions(baseline) == _actions(_play(toolshop, ExpertPolicy(), task, max_steps=40))
        expert_share.append(_share_unsure(expert.assessments, SHOP_UNSURE))
        episode = _play(toolshop, policy, task, max_steps=40)
        assert episode.metadata.get("error") is None
        finished += bool(episode.metadata["terminated"] and episode.success)
        shares.append(_share_unsure(policy.assessments, SHOP_UNSURE))
        assessed += sum(item is not None for item in policy.assessments)
        assert len(policy.choices) == len(policy.assessments) >= len(episode.turns)  # hand-overs are no turns
    assert finished >= len(SHOP_TASKS) - 1  # detours rarely spoil the task
    assert sum(shares) / len(shares) > sum(expert_share) / len(expert_share)
    assert sum(policy.tried.values()) == assessed  # what it played is remembered across episodes


def test_toolshop_is_deterministic_for_a_seed(toolshop, shop_book) -> None:
    runs = [[_actions(_play(toolshop, ExploringPolicy(shop_book, seed=3, explore=0.7), task, max_steps=30))
             for task in SHOP_TASKS[:3]] for _ in range(2)]
    assert runs[0] == runs[1]
    other = [_actions(_play(toolshop, ExploringPolicy(shop_book, seed=4, explore=0.7), task, max_steps=30))
             for task in SHOP_TASKS[:3]]
    assert other != runs[0]


def test_a_detour_that_ended_an_episode_is_not_taken_again(toolshop, shop_book) -> None:
    policy = ExploringPolicy(shop_book, seed=5, explore=1.0)
    _play(toolshop, policy, SHOP_TASKS[0], max_steps=1)  # cut short right after an exploring step
    last = policy.assessments[-1]
    assert policy.choices == ["explore"] and last is not None and policy.ended == set()
    policy.explore, policy.max_detour = 0.999, 50  # explores (the same coin draws), but minds what ended episodes
    policy.tried.clear()  # the same state and candidates as before: only `ended` tells them apart
    _play(toolshop, policy, SHOP_TASKS[0], max_steps=1)
    assert policy.ended == {last.signature}
    assert policy.choices == ["explore"] and policy.assessments[0] is not None
    assert policy.assessments[0].signature != last.signature


# ---------------------------------------------------------------------------------------------- parts


def test_component_candidates_leave_the_policies_bookkeeping_alone(toolshop) -> None:
    probing = ProbingPolicy(seed=1)
    observation, info = toolshop.reset(SHOP_TASKS[0], seed=0)
    probing.reset(toolshop, observation, info)
    offered = probing.candidates(draws=4)
    assert set(offered) == set(ProbingPolicy.PROPOSERS) and offered["query"] and offered["fail"]
    assert probing.choices == [] and probing._done == []
    curious = CuriousPolicy(seed=1)
    curious.reset(toolshop, observation, info)
    assert set(curious.candidates()) == set(CuriousPolicy.PROPOSERS) and curious.choices == []


def test_bad_options_are_refused(shop_book) -> None:
    for options in ({"explore": 1.5}, {"max_candidates": 0}, {"max_detour": 0}, {"write_weight": 2.0}):
        with pytest.raises(ValueError):
            ExploringPolicy(shop_book, **options)
    with pytest.raises(RuntimeError, match="reset"):
        ExploringPolicy(shop_book).act(None, {})  # type: ignore[arg-type]
