"""The BFCL v4 multi-turn adapter on bfcl-eval's real backends (all in-process; a few seconds)."""

from __future__ import annotations

import json
import uuid

import pytest

pytest.importorskip("bfcl_eval", reason="bfcl-eval is not installed (pip install --no-deps bfcl-eval mpmath)")
pytest.importorskip("mpmath", reason="bfcl-eval's MathAPI needs mpmath")

from worldsmith.envs import EnvError, ExpertPolicy, UnknownTaskError, check_env, make, record_episode  # noqa: E402
from worldsmith.envs.bfcl import BFCLEnv, _category_entries  # noqa: E402
from worldsmith.envs.replay import replay_episode  # noqa: E402
from worldsmith.traces.model import Action  # noqa: E402

pytestmark = pytest.mark.integration

# Together these touch all eight multi-turn backends, a held-out-function entry, a long-context
# TradingBot entry (extension tables, local-time stamps) and MathAPI.logarithm (mpmath results).
ENTRIES = {
    "multi_turn_base_1": {"GorillaFileSystem"},
    "multi_turn_base_15": {"GorillaFileSystem", "MathAPI"},
    "multi_turn_base_51": {"MessageAPI", "VehicleControlAPI"},
    "multi_turn_base_102": {"TradingBot", "TicketAPI"},
    "multi_turn_base_151": {"TwitterAPI", "TravelAPI"},
    "multi_turn_base_49": {"GorillaFileSystem", "MathAPI"},
    "multi_turn_miss_func_0": {"TwitterAPI", "GorillaFileSystem"},
    "multi_turn_long_context_100": {"TradingBot"},
}
CATEGORIES = ["multi_turn_base", "multi_turn_long_context", "multi_turn_miss_func", "multi_turn_miss_param"]


@pytest.fixture(scope="module")
def env() -> BFCLEnv:
    environment = make("bfcl")
    assert isinstance(environment, BFCLEnv)
    return environment


def _entry(task: str):
    return _category_entries(task.rsplit("_", 1)[0])[task]


def _tool_names(tools: list[dict]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


def test_tasks_are_the_entry_ids_of_every_multi_turn_category(env: BFCLEnv) -> None:
    tasks = env.tasks()
    assert set(env.categories) >= set(CATEGORIES)
    assert len(tasks) == len(set(tasks)) >= 800
    assert set(ENTRIES) <= set(tasks)
    only_base = BFCLEnv(categories=["multi_turn_base"])
    assert only_base.tasks() and all(task.startswith("multi_turn_base_") for task in only_base.tasks())
    with pytest.raises(ValueError, match="unknown BFCL multi-turn categories"):
        BFCLEnv(categories=["simple_python"])


def test_check_env_passes(env: BFCLEnv) -> None:
    check_env(env, "multi_turn_base_1")


@pytest.mark.parametrize("task", sorted(ENTRIES))
def test_expert_runs_every_ground_truth_call_and_wins(env: BFCLEnv, task: str) -> None:
    entry = _entry(task)
    assert set(entry.involved_classes) == ENTRIES[task]
    episode = record_episode(env, ExpertPolicy(), task, max_steps=100)
    assert episode.success is True, episode.metadata
    ground_truth = [call for turn in entry.ground_truth for call in turn]
    assert [turn.action.raw for turn in episode.turns] == ground_truth
    for turn in episode.turns:
        assert not turn.observation.text.startswith("Error during execution"), (turn.action.raw, turn.observation.text)
        assert turn.info["error"] is False
    assert episode.metadata["terminated"] is True
    hand_overs = [event for turn in episode.turns for event in turn.context if event.name == "handover:respond"]
    hand_overs += [event for event in episode.final_context if event.name == "handover:respond"]
    assert len(hand_overs) == len(entry.turns)  # one reply to the user per user turn
    assert episode.initial_observation.text == entry.turns[0][0]["content"] == episode.task
    assert set(episode.initial_state) == set(entry.involved_classes)
    json.dumps(episode.initial_state, allow_nan=False)


def test_final_step_reports_the_outcome(env: BFCLEnv) -> None:
    env.reset("multi_turn_base_102")
    while (action := env.expert_action()) is not None:
        result = env.step(action)
    assert result.terminated and result.reward == 1.0
    info = result.info
    assert info["record"] is False and info["context"] == []
    assert info["won"] is True and info["bfcl_valid"] is True
    assert info["ground_truth_calls"] == info["ground_truth_ok"] == 5 and info["ground_truth_failed"] == []
    with pytest.raises(EnvError, match="is over"):
        env.step("get_current_time()")


def test_observations_match_bfcl_own_harness(env: BFCLEnv) -> None:
    """Every ground-truth result, rendered as bfcl's execute_multi_turn_func_call renders it."""
    import mpmath
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_utils import execute_multi_turn_func_call

    model = f"worldsmith_test_{uuid.uuid4().hex}"  # bfcl caches instances in globals by model and entry id
    for task in ("multi_turn_base_49", "multi_turn_base_102", "multi_turn_base_151", "multi_turn_long_context_100"):
        entry = _entry(task)
        mpmath.mp.dps = 15  # bfcl's own calls leave MathAPI's precision behind; ours must not depend on it
        env.reset(task)
        seen = []
        while (action := env.expert_action()) is not None:
            result = env.step(action)
            if action.name != "respond":
                seen.append(result.observation.text)
        assert mpmath.mp.dps == 15  # and ours restore it
        expected = [
            execute_multi_turn_func_call(
                [call], entry.initial_config, entry.involved_classes, model, task, long_context=entry.long_context
            )[0][0]
            for turn in entry.ground_truth
            for call in turn
        ]
        assert seen == expected, task
        if task == "multi_turn_base_49":  # logarithm returns an mpmath number, printed at the precision it set
            assert any("mpf(" in text for text in seen)


def test_replay_reproduces_the_recorded_observations(env: BFCLEnv) -> None:
    for task in ("multi_turn_base_102", "multi_turn_miss_func_0", "multi_turn_long_context_100"):
        episode = record_episode(env, ExpertPolicy(), task, max_steps=100)
        result = replay_episode(episode, env)
        assert result.reproduced is True, (task, result.first_divergence)
        assert result.success is True
        again = record_episode(env, ExpertPolicy(), task, max_steps=100)
        assert [turn.state for turn in again.turns] == [turn.state for turn in episode.turns]


def test_unknown_task(env: BFCLEnv) -> None:
    with pytest.raises(UnknownTaskError, match="multi_turn_base_99999"):
        env.reset("multi_turn_base_99999")
    with pytest.raises(UnknownTaskError, match="tasks"):
        BFCLEnv(categories=["multi_turn_base"]).reset("multi_turn_miss_func_0")


def test_invalid_calls_get_bfcl_error_text(env: BFCLEnv) -> None:
    env.reset("multi_turn_base_1")
    cases = {
        "xyzzy plugh": "Error during execution: name 'xyzzy' is not defined",
        "frobnicate(x=1)": "Error during execution: name 'frobnicate' is not defined",
        "GorillaFileSystem.ls()": "Error during execution: name 'GorillaFileSystem' is not defined",
        "cd(foo='x')": "Error during execution: GorillaFileSystem.cd() got an unexpected keyword argument 'foo'",
        "cd()": "Error during execution: GorillaFileSystem.cd() missing 1 required positional argument: 'folder'",
        "run(command='ls')": "Error during execution: Function call run is not allowed.",
        "_load_scenario(scenario={})": "Error during execution: name '_load_scenario' is not defined",
    }
    for text, expected in cases.items():
        result = env.step(text)
        assert result.observation.text == expected, text
        assert result.info["error"] is True and not result.terminated
    not_literal = env.step("cd(folder=pwd())").observation.text
    assert not_literal.startswith("Error during execution: arguments must be literal values")
    assert env.step("print('hi')").observation.text == "Error during execution: name 'print' is not defined"


def test_call_forms_agree(env: BFCLEnv) -> None:
    """Text call syntax, positional arguments and JSON keyword arguments run the same call."""
    forms = [
        "cd(folder='workspace')",
        "cd('workspace')",
        "[cd(folder='workspace')]",
        Action(name="cd", arguments={"folder": "workspace"}),
        '{"name": "cd", "arguments": {"folder": "workspace"}}',
    ]
    texts = []
    for form in forms:
        env.reset("multi_turn_base_1")
        texts.append(env.step(form).observation.text)
    assert texts == ['{"current_working_directory": "workspace"}'] * len(forms)
    env.reset("multi_turn_base_1")
    assert env.step("ls(a=True)").observation.text == '{"current_directory_content": ["workspace"]}'


def test_held_out_functions_arrive_at_their_turn(env: BFCLEnv) -> None:
    from bfcl_eval.constants.default_prompts import DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC

    _, info = env.reset("multi_turn_miss_func_0")
    assert "sort" not in _tool_names(info["tools"]) and "cd" in _tool_names(info["tools"])
    assert "cp" not in _tool_names(info["tools"])  # the entry's excluded_function
    assert all(tool["function"]["parameters"]["type"] == "object" for tool in info["tools"])
    changes = []
    while (action := env.expert_action()) is not None:
        result = env.step(action)
        if "tools" in result.info:
            changes.append(result)
    assert len(changes) == 1
    change = changes[0]
    assert change.info["turn"] == 3 and change.info["tools_added"] == ["sort"]
    assert _tool_names(change.info["tools"])[-1] == "sort"
    assert change.observation.text == DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
    assert change.info["context"] == [{"role": "user", "content": DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC}]
    assert result.info["won"] is True


def test_skipping_the_ground_truth_loses(env: BFCLEnv) -> None:
    observation, _ = env.reset("multi_turn_base_1")
    turns = len(_entry("multi_turn_base_1").turns)
    for index in range(turns):
        result = env.step(Action(name="respond", arguments={"text": "I cannot help with that."}))
        assert result.info["record"] is False
        assert result.terminated is (index == turns - 1)
        if not result.terminated:
            assert result.info["context"][0]["role"] == "user"
            assert result.observation.text == result.info["context"][0]["content"]
    assert result.info["won"] is False and result.reward == 0.0
    assert result.info["ground_truth_ok"] == 0 and len(result.info["ground_truth_failed"]) == 6
    assert result.info["bfcl_valid"] is False
    assert result.info["bfcl_error"]["error_type"] == "multi_turn:empty_turn_model_response"


def test_state_is_what_bfcl_compares(env: BFCLEnv) -> None:
    env.reset("multi_turn_base_1")
    before = env.state()
    assert before == env.state()  # reading the state changes nothing
    assert before["GorillaFileSystem"]["root"] == _entry("multi_turn_base_1").initial_config["GorillaFileSystem"]["root"]
    assert not any(key.startswith("_") for key in before["GorillaFileSystem"])
    env.step("cd(folder='workspace')")
    env.step("mkdir(dir_name='notes')")
    after = env.state()["GorillaFileSystem"]["root"]["alex"]["contents"]["workspace"]["contents"]
    assert after["notes"] == {"type": "directory", "contents": {}}
    env.reset("multi_turn_base_51")
    state = env.state()
    assert isinstance(state["MessageAPI"]["generated_ids"], list)
    json.dumps(state, allow_nan=False)


def test_local_time_is_utc_so_trading_bot_replays(env: BFCLEnv) -> None:
    import os
    import time

    assert os.environ["TZ"] == "UTC" and time.timezone == 0 and time.localtime(0).tm_hour == 0
