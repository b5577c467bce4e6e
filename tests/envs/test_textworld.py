"""TextWorld adapter: tw-make games of every kind, the walkthrough expert, replay, task-id grammar, errors."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from worldsmith.envs import (
    EnvError,
    ExpertPolicy,
    InvalidActionError,
    ReplayPolicy,
    TaskLoadError,
    UnknownTaskError,
    check_env,
    make,
    record_episode,
)
from worldsmith.envs.textworld import KINDS, TextWorldEnv, clean_feedback, parse_task

# Small games, one per kind (about 3 s of tw-make each).
GAMES = {
    "custom": "custom:world_size=2,nb_objects=3,quest_length=2:seed=1234",
    "cooking": "cooking:recipe=2,take=1,go=6,open,cut:seed=11",
    "coin_collector": "coin_collector:level=3:seed=42",
    "treasure_hunter": "treasure_hunter:level=2:seed=7",
}


@pytest.fixture(scope="module")
def games_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """All four games generated once, two tw-make runs at a time; one task is asked for twice at once."""
    pytest.importorskip("textworld", reason="textworld is not installed (pip install 'worldsmith[envs]')")
    root = tmp_path_factory.mktemp("tw-games")
    env = TextWorldEnv(games_dir=str(root))
    wanted = [*GAMES.values(), GAMES["coin_collector"]]  # the duplicate races its twin for the cache entry
    with ThreadPoolExecutor(2) as pool:
        paths = list(pool.map(env.game_path, wanted))
    assert paths[-1] == paths[2]
    return root


@pytest.fixture
def env(games_dir: Path):
    environment = make("textworld", games_dir=str(games_dir))
    yield environment
    environment.close()


# ---------------------------------------------------------------- task ids (no game needed)


def test_task_ids_are_canonicalised() -> None:
    spec = parse_task("tw-cooking: cut, go=6 ,open,take=1,recipe=2 :seed=11")
    assert spec.task_id == "cooking:cut,go=6,open,recipe=2,take=1:seed=11"
    assert spec.tw_make_args() == ["tw-cooking", "--cut", "--go", "6", "--open", "--recipe", "2", "--take", "1",
                                   "--seed", "11"]
    assert parse_task("custom:world-size=3:seed=1").task_id == "custom:world_size=3:seed=1"
    assert parse_task("custom:seed=5").tw_make_args() == ["custom", "--seed", "5"]
    assert len(TextWorldEnv().tasks()) == len(set(TextWorldEnv().tasks())) >= 4 * 5
    assert {task.split(":")[0] for task in TextWorldEnv().tasks()} == {
        "custom", "cooking", "coin_collector", "treasure_hunter"}


@pytest.mark.parametrize(
    ("task", "message"),
    [
        ("dungeon:level=3:seed=1", r"no game kind 'dungeon' \(kinds: custom, cooking"),
        ("coin_collector:levle=5:seed=1", r"no option 'levle' \(valid: level=<1..300>\)"),
        ("coin_collector:seed=1", r"need level=<1..300>"),
        ("treasure_hunter:level=31:seed=1", r"between 1 and 30"),
        ("coin_collector:level=161:seed=1", r"more than 100 rooms"),
        ("cooking:go=7:seed=1", r"'go' must be one of 1, 6, 9, 12"),
        ("cooking:open=yes:seed=1", r"'open' is a flag"),
        ("cooking:recipe=two:seed=1", r"must be an integer"),
        ("cooking:recipe=2", r"seed=<int>"),
        ("cooking:recipe=2:seed=-3", r"seed=<int>"),
        ("custom:world_size=3,world_size=4:seed=1", r"given twice"),
        ("missing/game.z8", r"no TextWorld game file"),
    ],
)
def test_bad_task_ids_say_what_is_wrong(task: str, message: str) -> None:
    with pytest.raises(UnknownTaskError, match=message) as caught:
        TextWorldEnv().game_path(task)
    assert task in str(caught.value)


def test_option_table_matches_tw_make() -> None:
    """Our option names, kinds and choices are exactly what tw-make's own parser accepts."""
    pytest.importorskip("textworld", reason="textworld is not installed")
    script = Path(sys.executable).parent / "tw-make"
    if not script.is_file():
        pytest.skip("tw-make is not installed next to this Python")
    loader = importlib.machinery.SourceFileLoader("tw_make_script", str(script))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("tw_make_script", loader))
    loader.exec_module(module)
    _, custom_parser, challenge_parsers = module.build_parser(default_parser_only=False)
    parsers = {"custom": custom_parser, **{p.prog.split()[-1]: p for p in challenge_parsers}}
    general = {"help", "output", "seed", "format", "overview", "save_overview", "force", "silent", "verbose"}
    for kind, (subcommand, options) in KINDS.items():
        actions = {a.dest: a for a in parsers[subcommand]._actions if a.dest not in general}
        assert set(actions) == set(options), kind
        for name, spec in options.items():
            action = actions[name]
            assert (spec.kind == "flag") == (action.nargs == 0), (kind, name)
            assert tuple(map(str, action.choices or ())) == spec.choices, (kind, name)
            assert spec.required == action.required, (kind, name)


def test_clean_feedback_strips_only_chrome() -> None:
    status = ">" + " " * 60 + "-= Kitchen =-4/15"
    assert clean_feedback(f"\nYou eat the meal.\n\n{status}") == "You eat the meal."
    assert clean_feedback("\nAre you sure you want to quit?" + " " * 40 + "-= Attic =-0/5") == (
        "Are you sure you want to quit?")
    banner = "\n  ____\n |  \\ \\$$\n\n"
    assert clean_feedback(banner + "Welcome -= home =-!\n>", initial=True) == "Welcome -= home =-!"
    assert clean_feedback(banner + "Welcome\n>") == banner.strip("\n") + "\n\nWelcome"  # only at reset


# ---------------------------------------------------------------- real games


@pytest.mark.integration
def test_check_env(env: TextWorldEnv) -> None:
    check_env(env, GAMES["cooking"])


@pytest.mark.integration
@pytest.mark.parametrize("kind", list(GAMES))
def test_expert_wins_each_kind(env: TextWorldEnv, kind: str) -> None:
    episode = record_episode(env, ExpertPolicy(), GAMES[kind], max_steps=100)
    assert episode.success is True, episode.metadata
    assert episode.env_id == f"textworld/{kind}"
    assert episode.task and episode.initial_observation is not None
    assert "$$" not in episode.initial_observation.text  # the banner is chrome
    assert episode.turns and episode.turns[-1].done is True
    last = episode.turns[-1]
    assert last.info["won"] is True and last.info["score"] == last.info["max_score"] == episode.reward
    assert "*** The End ***" in last.observation.text and "-= " not in last.observation.text.splitlines()[-1]
    assert episode.initial_state is not None and any(f.startswith("at(P, ") for f in episode.initial_state["facts"])
    assert all(turn.state is not None for turn in episode.turns)


@pytest.mark.integration
def test_replay_reproduces_the_walkthrough(env: TextWorldEnv) -> None:
    task = GAMES["cooking"]
    recorded = record_episode(env, ExpertPolicy(), task, max_steps=100)
    replayed = record_episode(env, ReplayPolicy([turn.action for turn in recorded.turns]), task, max_steps=100)
    assert replayed.initial_observation == recorded.initial_observation
    assert [t.observation.text for t in replayed.turns] == [t.observation.text for t in recorded.turns]
    assert [t.state for t in replayed.turns] == [t.state for t in recorded.turns]
    assert replayed.success is True


@pytest.mark.integration
def test_invalid_action_gets_the_games_answer(env: TextWorldEnv) -> None:
    env.reset(GAMES["coin_collector"])
    first_expert = env.expert_action()
    before = env.state()
    result = env.step("xyzzy")
    assert result.observation.text == "That's not a verb I recognise."
    assert result.reward == 0.0 and result.terminated is False and result.info["won"] is False
    assert env.state() == before  # nothing happened in the world
    assert env.expert_action() == first_expert  # the walkthrough does not skip ahead on a detour
    with pytest.raises(InvalidActionError, match="one line"):
        env.step("look\ngo south")
    with pytest.raises(InvalidActionError, match="reset"):
        env.step("restart")


@pytest.mark.integration
def test_state_is_ground_truth_and_read_only(env: TextWorldEnv) -> None:
    _, info = env.reset(GAMES["treasure_hunter"])
    state = env.state()
    assert state == env.state() and state["facts"] == sorted(state["facts"])
    assert info["admissible_actions"] == sorted(info["admissible_actions"]) == env.admissible_actions()
    move = env.expert_action()
    assert move is not None and move.raw in env.admissible_actions()
    env.step(move)
    assert env.state()["facts"] != state["facts"]


@pytest.mark.integration
def test_game_file_path_is_a_task(env: TextWorldEnv, games_dir: Path) -> None:
    by_id, _ = env.reset(GAMES["cooking"])
    path = env.game_path(GAMES["cooking"])
    assert Path(path).is_relative_to(games_dir) and Path(path).with_suffix(".json").is_file()
    fresh = make("textworld", games_dir=str(games_dir))
    try:
        episode = record_episode(fresh, ExpertPolicy(), path, max_steps=100)
    finally:
        fresh.close()
    assert episode.initial_observation == by_id
    assert episode.success is True and episode.env_id == "textworld/cooking"


@pytest.mark.integration
def test_cache_holds_one_finished_copy_per_game(games_dir: Path) -> None:
    folders = [p for p in games_dir.glob("textworld-*/*") if p.is_dir()]
    assert sorted(p.name for p in folders) == sorted(parse_task(t).cache_name for t in GAMES.values())
    assert not list(games_dir.glob("textworld-*/.tmp-*"))  # the raced duplicate left nothing behind


@pytest.mark.integration
def test_game_over_and_unstarted_use_are_errors(env: TextWorldEnv) -> None:
    with pytest.raises(EnvError, match="reset"):
        env.step("look")
    assert env.expert_action() is None and env.state() is None
    env.reset(GAMES["treasure_hunter"])
    while (move := env.expert_action()) is not None:
        result = env.step(move)
    assert result.terminated and result.info["won"]
    with pytest.raises(EnvError, match="game is over"):
        env.step("look")


@pytest.mark.integration
def test_tw_make_failure_is_a_task_load_error(tmp_path: Path) -> None:
    pytest.importorskip("textworld", reason="textworld is not installed")
    task = "custom:theme=klingon:seed=1"
    with pytest.raises(TaskLoadError, match=r"tw-make failed \(exit 2\): tw-make custom: error: Theme .*klingon") as caught:
        TextWorldEnv(games_dir=str(tmp_path)).reset(task)
    assert task in str(caught.value)
    assert not [p for p in tmp_path.rglob("*") if p.is_dir() and p.name.startswith(".tmp-")]
