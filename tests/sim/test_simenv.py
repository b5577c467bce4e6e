"""SimEnv as an Env (checker, policies, recorder), replaying simulated plans for real, the oracle, Gymnasium."""

from __future__ import annotations

import warnings

import pytest
from sim_support import book_from, opening

from worldsmith.envs import ExpertPolicy, Step, UnknownTaskError, check_env, make_policy, record_episode
from worldsmith.envs.replay import replay
from worldsmith.sim import NearestEvidence, SimEnv
from worldsmith.sim.harness import Harness
from worldsmith.sim.oracle_model import RealEnvOracle
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.sim.simenv import GYMNASIUM_AVAILABLE, GymnasiumSimEnv
from worldsmith.traces import Action, Episode, Observation


def _sim(episodes: list[Episode], tasks: list[Episode] | None = None) -> SimEnv:
    book = book_from(episodes, "alfworld")
    return SimEnv(NearestEvidence(book), tasks=tasks if tasks is not None else episodes, book=book, max_steps=10)


def test_simenv_passes_the_env_checker(alfworld: list[Episode]) -> None:
    env = _sim(alfworld)
    check_env(env, alfworld[0].task_id)


def test_reset_step_and_errors(alfworld: list[Episode]) -> None:
    env = SimEnv(NearestEvidence(book_from(alfworld, "alfworld")), tasks={"room": "You are in a room."},
                 env_id="alfworld/sim")
    assert env.tasks() == ["room"] and env.name == "sim:alfworld/sim"
    with pytest.raises(RuntimeError, match="reset"):
        env.step("look")
    observation, info = env.reset()
    assert observation.text == "You are in a room." and info["task_id"] == "room"
    assert env.admissible_actions() is None  # no book, and nearest evidence lists no actions of its own
    result = env.step("take mug 3 from shelf 2")
    assert isinstance(result, Step) and result.observation.text == "You pick up the mug 3 from the shelf 2."
    assert result.info["route"] == "fallback:nearest_evidence" and result.info["outcome"] == "success"
    assert [a.raw for a in env.actions] == ["take mug 3 from shelf 2"]
    with pytest.raises(UnknownTaskError):
        env.reset("nowhere")
    assert env.expert_action() is None  # text tasks have no recording to follow


def test_expert_policy_follows_the_recording_in_simulation(alfworld: list[Episode]) -> None:
    env = _sim(alfworld)
    episode = alfworld[1]
    recorded = record_episode(env, ExpertPolicy(), episode.task_id, max_steps=20)
    assert [t.action.raw for t in recorded.turns] == [t.action.raw for t in episode.turns]
    assert recorded.initial_observation.text == episode.initial_observation.text
    reproduced = sum(a.observation.text == b.observation.text for a, b in zip(recorded.turns, episode.turns, strict=True))
    assert reproduced >= 1  # its own evidence is in the book: at least the fixed-form answers come back


def test_random_policy_runs_in_simulation_until_truncated(alfworld: list[Episode]) -> None:
    env = _sim(alfworld)
    policy = make_policy("random", seed=3)
    observation, info = env.reset(alfworld[0].task_id)
    policy.reset(env, observation, info)
    steps = 0
    while True:
        action = policy.act(observation, info)
        assert action is not None and action.raw in info["admissible_actions"]
        result = env.step(action)
        observation, info, steps = result.observation, result.info, steps + 1
        if result.terminated or result.truncated:
            break
    assert steps == 10 and result.truncated and len(env.actions) == 10


@pytest.fixture(scope="module")
def real_alfworld():
    pytest.importorskip("alfworld", reason="alfworld is not installed (pip install 'worldsmith[envs]')")
    pytest.importorskip("textworld.envs.pddl", reason="textworld[pddl] is not installed")
    from worldsmith.envs import make

    env = make("alfworld")
    if not env.tasks():
        pytest.skip("no ALFWorld games (set WORLDSMITH_ALFWORLD_GAMES)")
    yield env
    env.close()


@pytest.mark.integration
def test_actions_chosen_in_simulation_replay_in_the_real_env(alfworld: list[Episode], real_alfworld) -> None:
    env = _sim(alfworld)
    task = alfworld[0].task_id
    policy = make_policy("random", seed=7)
    recorded = record_episode(env, policy, task, max_steps=6)
    assert len(recorded.turns) == 6
    result = replay(real_alfworld, task, env.actions)
    assert result.initial_observation == alfworld[0].initial_observation.text
    assert [step.action for step in result.steps] == [a.raw for a in env.actions][: len(result.steps)]
    assert len(result.steps) == 6 or result.stopped_early


@pytest.mark.integration
def test_oracle_replays_the_prefix_and_answers_for_real(alfworld: list[Episode], real_alfworld) -> None:
    episode = alfworld[0]
    oracle = RealEnvOracle(real_alfworld, episode.task_id, seed=0)
    oracle.start(opening(episode, 2))
    assert oracle.prefix_divergence is None and oracle.opening == episode.initial_observation.text
    detour = oracle.predict("inventory")  # tried, not committed
    assert detour.audit.route == "oracle" and detour.audit.tool_calls[0]["action"] == "inventory"
    prediction = oracle.predict(episode.turns[2].action)  # resets and replays before stepping
    assert prediction.observation == episode.turns[2].observation.text
    assert any("replayed" in note for note in prediction.audit.notes)
    oracle.commit()
    assert len(oracle.history) == 3 and oracle.admissible_actions()
    for turn in episode.turns[3:]:
        last = oracle.predict(turn.action)
        assert last.observation == turn.observation.text
        oracle.commit()
    assert last.done and last.reward > 0 and last.outcome == "success"


@pytest.mark.integration
def test_oracle_reports_a_prefix_that_the_env_does_not_reproduce(alfworld: list[Episode], real_alfworld) -> None:
    episode = alfworld[0]
    altered = opening(episode, 1)
    altered.turns[0] = altered.turns[0].model_copy(update={"observation": Observation(text="something else")})
    oracle = RealEnvOracle(real_alfworld, episode.task_id, seed=0)
    oracle.start(altered)
    assert oracle.prefix_divergence == 0
    assert "diverged from the prefix at turn 0" in oracle.predict("look").audit.notes[-1]


@pytest.mark.integration
def test_simenv_over_the_oracle_matches_the_recording(alfworld: list[Episode], real_alfworld) -> None:
    episode = alfworld[0]
    env = SimEnv(RealEnvOracle(real_alfworld, episode.task_id, seed=0), tasks=[episode])
    env.close = lambda: None  # the module fixture owns the real environment
    recorded = record_episode(env, ExpertPolicy(), episode.task_id, max_steps=20)
    assert [t.observation.text for t in recorded.turns] == [t.observation.text for t in episode.turns]
    assert recorded.success is True


def test_gymnasium_wrapper(alfworld: list[Episode]) -> None:
    env = GymnasiumSimEnv(_sim(alfworld), task=alfworld[0].task_id)
    assert GYMNASIUM_AVAILABLE  # the envs extra installs it
    observation, info = env.reset(seed=0)
    assert observation == alfworld[0].initial_observation.text and info["task_id"] == alfworld[0].task_id
    assert env.observation_space.contains(observation)
    result = env.step(alfworld[0].turns[0].action.raw)
    assert isinstance(result, tuple) and len(result) == 5 and isinstance(result[0], str)
    assert isinstance(result[1], float) and result[2] is False and isinstance(result[4], dict)
    assert "latency_s" not in result[4]["audit"] and result[4]["route"]
    assert env.step(Action(name="go", arguments={"text": "to bed 1"}, raw="go to bed 1"))[0]


def _harness_sim(episodes: list[Episode]) -> SimEnv:
    book = build_simulator_book(episodes, name="alfworld").book
    return SimEnv(Harness(book), tasks=episodes, book=book, max_steps=10)


@pytest.mark.parametrize("make_sim", [_sim, _harness_sim], ids=["nearest", "harness"])
def test_gymnasium_env_checker_passes(alfworld: list[Episode], make_sim) -> None:
    from gymnasium.utils.env_checker import check_env as gym_check_env

    env = GymnasiumSimEnv(make_sim(alfworld))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker's warnings (an observation outside the space, ...) fail too
        warnings.filterwarnings("ignore", message=".*alternative render modes.*")  # no render modes, no spec
        gym_check_env(env, skip_render_check=True)
    observation, _ = env.reset(seed=1)
    assert env.observation_space.contains(observation)
    result = env.step(env.action_space.sample())  # random text: still an observation in the space
    assert env.observation_space.contains(result[0]) and result[4]["outcome"]


def test_gymnasium_observations_outside_the_charset(alfworld: list[Episode]) -> None:
    env = GymnasiumSimEnv(SimEnv(NearestEvidence(book_from(alfworld, "alfworld")),
                                 tasks={"cafe": "Un café crème\u2014s\u2019il vous plaît."}))
    observation, info = env.reset(seed=0)
    assert observation == "Un caf? cr?me?s?il vous pla?t." and env.observation_space.contains(observation)
    assert info["observation_text"] == "Un café crème\u2014s\u2019il vous plaît."
    plain, plain_info = env.reset(options={"task": "cafe"})
    assert plain == observation and "task_id" in plain_info
