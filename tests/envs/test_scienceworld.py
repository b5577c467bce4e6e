"""The ScienceWorld adapter against the real simulator (a JVM per environment; ~1.5 s to start)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

pytest.importorskip("scienceworld", reason="the scienceworld package is not installed (pip install 'worldsmith[envs]')")

from worldsmith.envs import (  # noqa: E402 - after the skip above
    EnvError,
    EnvUnavailableError,
    ExpertPolicy,
    ReplayPolicy,
    TaskLoadError,
    UnknownTaskError,
    check_env,
    make,
    record_episode,
)
from worldsmith.envs import scienceworld as scienceworld_module  # noqa: E402
from worldsmith.envs.scienceworld import ScienceWorldEnv, parse_task_id  # noqa: E402

# Short gold paths of different task types (find / lifespan / life stages), 5-14 steps each.
FIND_TASK = "find-non-living-thing:0"
LIFESPAN_TASK = "lifespan-longest-lived:0"
# Its room descriptions list several animals: with HotSpot's random identity hashes their order
# changes from load to load, so replaying it in a fresh JVM tests the adapter's determinism.
ORDER_SENSITIVE_TASK = "identify-life-stages-2:0"


def _java_missing() -> bool:
    import shutil

    return shutil.which("java") is None


needs_java = pytest.mark.skipif(_java_missing(), reason="ScienceWorld needs Java on PATH")


@pytest.fixture(scope="module")
def env() -> Iterator[ScienceWorldEnv]:
    environment = make("scienceworld")
    assert isinstance(environment, ScienceWorldEnv)
    yield environment
    environment.close()


def test_parse_task_id_grammar() -> None:
    names = ["boil", "find-animal"]
    assert parse_task_id("boil:3", names) == ("boil", 3)
    assert parse_task_id("boil", names) == ("boil", 0)
    assert parse_task_id("1-1", names) == ("boil", 0)
    assert parse_task_id("4-4:7", names) == ("find-animal", 7)
    assert parse_task_id("Matter Changes of State (Boiling):2", names) == ("boil", 2)
    for bad in ("no-such-task:0", "boil:x", "boil:-1", "boil:", ""):
        with pytest.raises(UnknownTaskError):
            parse_task_id(bad, names)


def test_missing_java_is_env_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scienceworld_module.shutil, "which", lambda program: None)
    with pytest.raises(EnvUnavailableError, match="Java"):
        ScienceWorldEnv().reset(FIND_TASK)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="split"):
        ScienceWorldEnv(split="validation")
    with pytest.raises(ValueError, match="step_limit"):
        ScienceWorldEnv(step_limit=0)


@pytest.mark.integration
@needs_java
def test_check_env() -> None:
    check_env(make("scienceworld"), FIND_TASK)


@pytest.mark.integration
@needs_java
def test_tasks_list_every_task_and_variation(env: ScienceWorldEnv) -> None:
    tasks = env.tasks()
    assert len(tasks) == len(set(tasks)) == 7207  # scienceworld 1.2.3: 30 tasks
    assert tasks[0] == "boil:0"
    assert "boil:29" in tasks and "boil:30" not in tasks
    assert "mendelian-genetics-unknown-plant:479" in tasks
    assert len({task.split(":")[0] for task in tasks}) == 30


@pytest.mark.integration
@pytest.mark.parametrize("task", [FIND_TASK, LIFESPAN_TASK])
@needs_java
def test_gold_path_reaches_100(env: ScienceWorldEnv, task: str) -> None:
    episode = record_episode(env, ExpertPolicy(), task, max_steps=300)
    assert episode.metadata.get("error") is None
    assert episode.success is True
    assert episode.reward == 100.0
    assert episode.turns[-1].done and episode.turns[-1].info["won"] is True
    assert sum(turn.reward for turn in episode.turns) == 100.0  # rewards are score deltas
    assert episode.initial_info["task_name"] == task.split(":")[0]
    assert episode.initial_state is not None and episode.initial_state["moves"] == 0


@pytest.mark.integration
@needs_java
def test_replay_reproduces_observations_in_the_same_and_a_fresh_jvm(env: ScienceWorldEnv) -> None:
    recorded = record_episode(env, ExpertPolicy(), ORDER_SENSITIVE_TASK, max_steps=300)
    assert recorded.success is True
    actions = [turn.action for turn in recorded.turns]
    expected = [recorded.initial_observation.text] + [turn.observation.text for turn in recorded.turns]
    fresh = make("scienceworld")
    try:
        for where in (env, fresh):
            again = record_episode(where, ReplayPolicy(actions), ORDER_SENSITIVE_TASK, record_state=where is fresh)
            observed = [again.initial_observation.text] + [turn.observation.text for turn in again.turns]
            assert observed == expected
            assert again.success is True
        assert fresh.expert_action() is None  # the replay followed the gold path to its end
    finally:
        fresh.close()


@pytest.mark.integration
@needs_java
def test_state_does_not_change_the_environment(env: ScienceWorldEnv) -> None:
    env.reset(FIND_TASK)
    before = env.state()
    assert before is not None and before == env.state()
    assert before["moves"] == 0 and before["subgoals"] and not before["subgoals"][0]["done"]
    step = env.step(env.expert_action())
    assert env.state()["moves"] == step.info["moves"] == 1


@pytest.mark.integration
@needs_java
def test_unknown_tasks(env: ScienceWorldEnv) -> None:
    for task in ("no-such-task", "boil:30", "boil:first"):
        with pytest.raises(UnknownTaskError, match=re.escape("tasks()")) as caught:
            env.reset(task)
        assert repr(task) in str(caught.value)


@pytest.mark.integration
@needs_java
def test_invalid_and_failing_actions_are_answered(env: ScienceWorldEnv) -> None:
    observation, info = env.reset("find-animal:0")
    assert observation.text.startswith("This room is called the hallway.")
    assert info["task"].startswith("Your task is to find a(n) animal.")
    gold_first = env.expert_action()
    answer = env.step("xyzzy plugh")
    assert answer.observation.text == "No known action matches that input."
    assert (answer.reward, answer.terminated, answer.truncated, answer.info["score"]) == (0.0, False, False, 0)
    assert env.expert_action() is None and gold_first is not None  # left the gold path
    failed = env.step("focus on air")  # not an animal: ScienceWorld fails the task
    assert failed.terminated and failed.info["failed"] and not failed.info["won"]
    assert failed.info["score"] == -100 and failed.reward == -100.0


@pytest.mark.integration
@needs_java
def test_a_task_that_cannot_load(env: ScienceWorldEnv) -> None:
    env.simplifications = "noSuchSimplification"
    try:
        with pytest.raises(TaskLoadError, match="(?i)find-non-living-thing:0.*unknown simplification.*nosuchsimplification"):
            env.reset(FIND_TASK)
        with pytest.raises(EnvError, match="no episode"):
            env.step("look around")
    finally:
        env.simplifications = ""


@pytest.mark.integration
@needs_java
def test_task_numbers_and_bare_names(env: ScienceWorldEnv) -> None:
    _, by_number = env.reset("7-1")
    assert (by_number["task_name"], by_number["variation"], by_number["task_number"]) == (LIFESPAN_TASK[:-2], 0, "7-1")
    _, by_name = env.reset("find-non-living-thing:3")
    assert (by_name["env_id"], by_name["variation"], by_name["max_score"]) == ("scienceworld/find-non-living-thing", 3, 100)


@pytest.mark.integration
@needs_java
def test_step_limit_truncates(env: ScienceWorldEnv) -> None:
    env.step_limit = 5
    try:
        env.reset(FIND_TASK)
        assert not env.step("wait1").truncated
        assert env.step("wait").truncated  # 10 more moves: past ScienceWorld's step limit
    finally:
        env.step_limit = None


@pytest.mark.integration
@needs_java
def test_split_restricts_variations() -> None:
    dev = make("scienceworld", split="dev")
    try:
        tasks = dev.tasks()
        assert [task for task in tasks if task.startswith("boil:")] == [f"boil:{v}" for v in range(14, 21)]
        with pytest.raises(UnknownTaskError, match="dev split"):
            dev.reset("boil:0")
    finally:
        dev.close()


@pytest.mark.integration
@needs_java
def test_a_jvm_that_does_not_answer_times_out_and_is_replaced() -> None:
    slow = make("scienceworld")
    try:
        slow.tasks()  # starts the JVM and caches the catalogue
        slow.load_timeout = 0.001
        with pytest.raises(EnvError, match="did not answer"):
            slow.reset(FIND_TASK)
        assert slow._jvm is not None and not slow._jvm.alive
        with pytest.raises(EnvError):
            slow.step("look around")
        slow.load_timeout = 120.0
        observation, _ = slow.reset(FIND_TASK)  # a fresh JVM
        assert observation.text.startswith("This room is called")
    finally:
        slow.close()
        slow.close()
