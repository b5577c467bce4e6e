"""ALFWorld adapter: task ids, the combined expert on varied task types, replay, state, load errors, the oracle."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import orjson
import pytest

from worldsmith.envs import (
    EnvError,
    ExpertPolicy,
    ReplayPolicy,
    TaskLoadError,
    UnknownTaskError,
    check_env,
    make,
    record_episode,
    spec,
)
from worldsmith.envs.alfworld import (
    GAME_FILE,
    GAMES_ENV_VAR,
    ALFWorldEnv,
    Goal,
    World,
    default_games_root,
    oracle_action,
)

ROOT = default_games_root()
# One game of each of these task types (the first such folder, whatever the sample holds).
EXPERT_TYPES = ("pick_heat_then_place_in_recep", "pick_clean_then_place_in_recep", "pick_two_obj_and_place")


def _first_of(tasks: list[str], task_type: str) -> str:
    for task in tasks:
        if task.split("/")[-2].startswith(task_type + "-"):
            return task
    pytest.skip(f"no {task_type} game among the ALFWorld games at {ROOT}")


@pytest.fixture(scope="module")
def env():
    pytest.importorskip("alfworld", reason="alfworld is not installed (pip install 'worldsmith[envs]')")
    pytest.importorskip("textworld.envs.pddl", reason="textworld[pddl] is not installed")
    environment = make("alfworld")
    if not environment.tasks():
        pytest.skip(f"no ALFWorld games at {ROOT} (set {GAMES_ENV_VAR})")
    yield environment
    environment.close()


@pytest.fixture(scope="module")
def episodes(env: ALFWorldEnv) -> dict[str, object]:
    """The combined expert's episode on one game of each type in EXPERT_TYPES."""
    tasks = env.tasks()
    return {kind: record_episode(env, ExpertPolicy(), _first_of(tasks, kind), max_steps=50) for kind in EXPERT_TYPES}


# ---------------------------------------------------------------- the real games


@pytest.mark.integration
def test_registry_spec_and_task_ids(env: ALFWorldEnv) -> None:
    assert spec("alfworld").max_steps == 50
    tasks = env.tasks()
    assert tasks == sorted(tasks)
    for task in tasks:
        assert (ROOT / task / GAME_FILE).is_file()
        assert not task.startswith("/") and task.count("/") == 2  # <split>/<task-type-...>/<trial_...>


@pytest.mark.integration
def test_check_env(env: ALFWorldEnv) -> None:
    task = _first_of(env.tasks(), "look_at_obj_in_light")
    check_env(env, task)
    observation, info = env.reset(task)
    assert observation.text.startswith("You are in the middle of a room")
    assert "Welcome to TextWorld" not in observation.text
    assert info["task"] and f"Your task is to: {info['task']}" in observation.text
    assert info["env_id"] == "alfworld/look_at_obj_in_light"
    assert "look" in info["admissible_actions"] and info["won"] is False
    answered = env.step("xyzzy plugh")
    assert answered.observation.text == "Nothing happens." and answered.reward == 0.0 and not answered.terminated


@pytest.mark.integration
@pytest.mark.parametrize("kind", EXPERT_TYPES)
def test_combined_expert_wins(episodes: dict[str, object], kind: str) -> None:
    episode = episodes[kind]
    assert episode.success is True, episode.metadata
    assert episode.env_id == f"alfworld/{kind}"
    assert len(episode.turns) <= 20  # the oracle goes straight there (the handcoded expert circles)
    assert episode.turns[-1].done and episode.turns[-1].reward == 1.0
    assert episode.turns[-1].info["won"] is True and episode.turns[-1].info["score"] == 1
    assert any(fact.startswith("holds(") for turn in episode.turns for fact in turn.state["facts"])


@pytest.mark.integration
def test_alfworlds_handcoded_expert_places_objects_once_it_reads_its_own_grammar(env: ALFWorldEnv) -> None:
    task = _first_of(env.tasks(), "pick_heat_then_place_in_recep")
    handcoded = ALFWorldEnv(expert="handcoded_fixed")
    try:
        episode = record_episode(handcoded, ExpertPolicy(), task, max_steps=50)
        assert episode.success is True, [turn.action.raw for turn in episode.turns]
        assert episode.turns[-1].action.raw.startswith("put ") and " in/on " in episode.turns[-1].action.raw
    finally:
        handcoded.close()


@pytest.mark.integration
def test_replay_reproduces_the_expert_episode(env: ALFWorldEnv, episodes: dict[str, object]) -> None:
    recorded = episodes["pick_heat_then_place_in_recep"]
    replayed = record_episode(env, ReplayPolicy([turn.action for turn in recorded.turns]), recorded.task_id)
    assert replayed.initial_observation.text == recorded.initial_observation.text
    assert [t.observation.text for t in replayed.turns] == [t.observation.text for t in recorded.turns]
    assert [t.state for t in replayed.turns] == [t.state for t in recorded.turns]
    assert replayed.success is True


@pytest.mark.integration
def test_absolute_paths_and_unknown_tasks(env: ALFWorldEnv, tmp_path: Path) -> None:
    task = env.tasks()[0]
    by_id, _ = env.reset(task)
    assert env.reset(str(ROOT / task))[0].text == by_id.text
    assert env.reset(str(ROOT / task / GAME_FILE))[0].text == by_id.text
    with pytest.raises(UnknownTaskError, match="no such/game/game.tw-pddl.*tasks\\(\\) lists them"):
        env.reset("no such/game")
    with pytest.raises(UnknownTaskError, match="no game.tw-pddl at"):
        env.reset(str(tmp_path))
    empty = ALFWorldEnv(games=str(tmp_path / "missing"))
    assert empty.tasks() == []
    with pytest.raises(UnknownTaskError, match="missing.*does not exist"):
        empty.reset("train/some/trial")


@pytest.mark.integration
def test_state_is_json_and_leaves_the_game_alone(env: ALFWorldEnv) -> None:
    task = _first_of(env.tasks(), "pick_and_place_simple")
    env.reset(task)
    first = env.state()
    orjson.dumps(first)
    assert first["facts"] == sorted(first["facts"]) and any(f.startswith("atlocation(agent1") for f in first["facts"])
    assert env.state() == first and env.expert_action() is not None and env.state() == first
    step = env.step(env.admissible_actions()[0])
    assert env.state() != first and isinstance(step.info["admissible_actions"], list)


@pytest.mark.integration
def test_memoised_engine_gives_the_same_game(env: ALFWorldEnv) -> None:
    task = _first_of(env.tasks(), "look_at_obj_in_light")
    plain = ALFWorldEnv(memoise=False)
    try:
        texts = []
        for game in (env, plain):
            observation, _ = game.reset(task)
            seen = [observation.text]
            while (action := game.expert_action()) is not None:
                seen.append(game.step(action).observation.text)
            texts.append(seen)
        assert texts[0] == texts[1] and len(texts[0]) > 2
    finally:
        plain.close()


def _copy_game(source: Path, root: Path, name: str) -> Path:
    target = root / "train" / source.parent.name / name
    shutil.copytree(source, target)
    return target


@pytest.mark.integration
def test_broken_game_is_a_task_load_error_and_the_next_game_still_plays(env: ALFWorldEnv, tmp_path: Path) -> None:
    source = ROOT / _first_of(env.tasks(), "look_at_obj_in_light")
    _copy_game(source, tmp_path, "trial_good")
    broken = _copy_game(source, tmp_path, "trial_undeclared")
    data = json.loads((broken / GAME_FILE).read_text())
    head, goal, tail = data["pddl_problem"].partition("(:goal")  # as in the movable-receptacle games
    data["pddl_problem"] = head + goal + tail.replace("(objectType ", "(receptacleObjectType ", 1)
    (broken / GAME_FILE).write_text(json.dumps(data))
    truncated = _copy_game(source, tmp_path, "trial_truncated")
    (truncated / GAME_FILE).write_text((source / GAME_FILE).read_text()[:5000])

    local = ALFWorldEnv(games=str(tmp_path))
    try:
        good, cut, undeclared = local.tasks()
        assert good.endswith("trial_good") and cut.endswith("trial_truncated")
        with pytest.raises(TaskLoadError, match="Undeclared predicate") as error:
            local.reset(undeclared)
        assert str(broken / GAME_FILE) in str(error.value) and undeclared in str(error.value)
        with pytest.raises(TaskLoadError, match="JSONDecodeError"):
            local.reset(cut)
        observation, info = local.reset(good)
        assert info["task"] and local.step("look").observation.text
        local.close()
        with pytest.raises(EnvError, match="reset"):
            local.step("look")
        assert local.reset(good)[0].text == observation.text  # a closed environment opens again
    finally:
        local.close()


@pytest.mark.integration
def test_planner_takes_over_where_the_oracle_knows_no_goal(env: ALFWorldEnv, tmp_path: Path) -> None:
    source = ROOT / _first_of(env.tasks(), "look_at_obj_in_light")
    game = tmp_path / "unlabelled" / "trial_1"
    game.mkdir(parents=True)
    shutil.copy(source / GAME_FILE, game / GAME_FILE)  # no traj_data.json, no task type in the folder name
    local = ALFWorldEnv(games=str(tmp_path))
    try:
        episode = record_episode(local, ExpertPolicy(), "unlabelled/trial_1", max_steps=50)
        assert episode.env_id == "alfworld/unknown" and episode.success is True, episode.metadata
        assert len(episode.turns) <= 10
        hurried = ALFWorldEnv(games=str(tmp_path), planner_timeout=0.001)
        hurried.reset("unlabelled/trial_1")
        assert hurried.expert_action() is None  # the search was stopped, not waited for
        hurried.close()
    finally:
        local.close()


# ---------------------------------------------------------------- the oracle on a hand-made room


def _room(*extra: tuple[str, tuple[str, ...]], admissible: tuple[str, ...] = (), cup_in_drawer: bool = True) -> World:
    facts = [
        ("receptacleatlocation", ("drawer 1", "loc 2")),
        ("receptacleatlocation", ("shelf 1", "loc 3")),
        ("receptacleatlocation", ("microwave 1", "loc 4")),
        ("receptacletype", ("drawer 1", "drawertype")),
        ("receptacletype", ("shelf 1", "shelftype")),
        ("receptacletype", ("microwave 1", "microwavetype")),
        ("openable", ("drawer 1",)),
        ("objecttype", ("cup 1", "cuptype")),
        ("objecttype", ("cup 2", "cuptype")),
        ("objecttype", ("pen 1", "pentype")),
        ("pickupable", ("cup 1",)),
        ("pickupable", ("cup 2",)),
        ("pickupable", ("pen 1",)),
        ("objectatlocation", ("cup 2", "loc 1")),  # on the floor: PickupObject cannot reach it
        *([("inreceptacle", ("cup 1", "drawer 1"))] if cup_in_drawer else []),
        *extra,
    ]
    return World.from_facts(facts, admissible)


HEAT_CUP = Goal.from_params("pick_heat_then_place_in_recep", {"object_target": "Cup", "parent_target": "Shelf"})
GOES = ("go to drawer 1", "go to shelf 1", "go to microwave 1")


def test_oracle_fetches_heats_and_places() -> None:
    start = _room(("atlocation", ("agent1", "loc 1")), admissible=GOES)
    assert oracle_action(start, HEAT_CUP) == "go to drawer 1"
    at_drawer = _room(("atlocation", ("agent1", "loc 2")), admissible=("open drawer 1", *GOES))
    assert oracle_action(at_drawer, HEAT_CUP) == "open drawer 1"
    opened = _room(("atlocation", ("agent1", "loc 2")), ("opened", ("drawer 1",)),
                   admissible=("take cup 1 from drawer 1", *GOES))
    assert oracle_action(opened, HEAT_CUP) == "take cup 1 from drawer 1"
    holding = (("atlocation", ("agent1", "loc 2")), ("holds", ("agent1", "cup 1")))
    assert oracle_action(_room(*holding, admissible=GOES, cup_in_drawer=False), HEAT_CUP) == "go to microwave 1"
    at_microwave = (("atlocation", ("agent1", "loc 4")), ("holds", ("agent1", "cup 1")))
    heat = ("heat cup 1 with microwave 1", *GOES)
    assert oracle_action(_room(*at_microwave, admissible=heat, cup_in_drawer=False), HEAT_CUP) == heat[0]
    hot = _room(*at_microwave, ("ishot", ("cup 1",)), admissible=GOES, cup_in_drawer=False)
    assert oracle_action(hot, HEAT_CUP) == "go to shelf 1"
    at_shelf = (("atlocation", ("agent1", "loc 3")), ("holds", ("agent1", "cup 1")), ("ishot", ("cup 1",)))
    put = ("put cup 1 in/on shelf 1", *GOES)
    assert oracle_action(_room(*at_shelf, admissible=put, cup_in_drawer=False), HEAT_CUP) == put[0]


def test_oracle_puts_down_a_wrong_object_and_stops_at_the_goal() -> None:
    wrong = _room(("atlocation", ("agent1", "loc 3")), ("holds", ("agent1", "pen 1")),
                  admissible=("put pen 1 in/on shelf 1", *GOES))
    assert oracle_action(wrong, HEAT_CUP) == "put pen 1 in/on shelf 1"
    done = _room(("atlocation", ("agent1", "loc 3")), ("inreceptacle", ("cup 2", "shelf 1")), ("ishot", ("cup 2",)))
    assert oracle_action(done, HEAT_CUP) is None
    cold = _room(("atlocation", ("agent1", "loc 3")), ("inreceptacle", ("cup 2", "shelf 1")),
                 admissible=("take cup 2 from shelf 1", *GOES))
    assert oracle_action(cold, HEAT_CUP) == "take cup 2 from shelf 1"  # not hot yet: it does not count
