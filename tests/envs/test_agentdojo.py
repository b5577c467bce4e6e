"""AgentDojo's workspace, slack and travel suites on AgentDojo's real tools and state (in-process; seconds)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("agentdojo", reason="agentdojo is not installed (pip install --no-deps agentdojo==0.1.35)")

from worldsmith.envs import (  # noqa: E402
    EnvError,
    ExpertPolicy,
    UnknownTaskError,
    check_env,
    make,
    make_policy,
    record_episode,
    registry,
)
from worldsmith.envs.agentdojo import SUITES, AgentDojoEnv  # noqa: E402
from worldsmith.envs.probing import _structured  # noqa: E402
from worldsmith.traces.model import Action  # noqa: E402
from worldsmith.util.errors import BadInputError  # noqa: E402

pytestmark = pytest.mark.integration

# A few tasks per suite: reads only, writes (email, calendar, files, channels, bookings), several steps.
EXPERT_TASKS = {
    "workspace": ["user_task_0", "user_task_13", "user_task_25", "user_task_39"],
    "slack": ["user_task_1", "user_task_2", "user_task_17"],
    "travel": ["user_task_0", "user_task_3", "user_task_19"],
}


@pytest.fixture(scope="module", params=SUITES)
def env(request: pytest.FixtureRequest) -> AgentDojoEnv:
    environment = make(f"agentdojo-{request.param}")
    assert isinstance(environment, AgentDojoEnv)
    return environment


def test_every_suite_is_registered_and_the_reserved_one_is_refused() -> None:
    names = set(registry())
    assert {f"agentdojo-{suite}" for suite in SUITES} <= names
    assert not any("banking" in name for name in names)
    with pytest.raises(BadInputError, match="refused"):
        AgentDojoEnv(suite="banking")
    with pytest.raises(BadInputError, match="refused"):
        make("agentdojo-slack", suite="banking")
    with pytest.raises(BadInputError, match="unknown AgentDojo suite"):
        AgentDojoEnv(suite="shopping")


def test_check_env_passes(env: AgentDojoEnv) -> None:
    check_env(env, env.tasks()[0])


def test_tasks_are_user_task_ids_and_reset_opens_with_the_prompt(env: AgentDojoEnv) -> None:
    tasks = env.tasks()
    assert tasks[0] == "user_task_0" and all(task.startswith("user_task_") for task in tasks)
    assert len(tasks) == len(set(tasks)) >= 20
    observation, info = env.reset("user_task_1")
    assert observation.text == info["task"] and len(observation.text) > 20
    assert info["env_id"] == f"agentdojo/{env.suite}" and info["suite"] == env.suite
    names = [tool["function"]["name"] for tool in info["tools"]]
    assert len(names) == len(set(names)) >= 11
    for tool in info["tools"]:
        assert tool["type"] == "function" and tool["function"]["parameters"]["type"] == "object"
    json.dumps(info)
    assert info["tools"] == env.reset("user_task_2")[1]["tools"]  # one tool set per suite: a stable identity
    with pytest.raises(UnknownTaskError):
        env.reset("user_task_9999")


@pytest.mark.parametrize(("suite", "task"), [(suite, task) for suite, tasks in EXPERT_TASKS.items() for task in tasks])
def test_the_ground_truth_passes_the_tasks_own_utility_check(suite: str, task: str) -> None:
    episode = record_episode(make(f"agentdojo-{suite}"), ExpertPolicy(), task, max_steps=40)
    assert episode.success is True and episode.reward == 1.0, episode.metadata
    assert episode.metadata["terminated"] and episode.turns
    assert not any(turn.info["error"] for turn in episode.turns)
    assert episode.initial_state is not None and episode.turns[-1].state is not None


def test_a_reply_without_the_work_fails_the_check_and_ends_the_episode() -> None:
    env = make("agentdojo-slack")
    env.reset("user_task_2")  # invite Dora: nothing done
    result = env.step(Action(name="respond", arguments={"text": "Done."}))
    assert result.terminated and result.reward == 0.0 and result.info["won"] is False
    assert result.info["record"] is False
    with pytest.raises(EnvError, match="over"):
        env.step("get_channels()")


def test_unknown_tools_and_bad_arguments_are_error_observations() -> None:
    env = make("agentdojo-slack")
    env.reset("user_task_0")
    answers = {action: env.step(action) for action in (
        "no_such_tool(x=1)", "read_channel_messages()", "read_channel_messages(channel=5)",
        "read_channel_messages(channel='no_such_channel')", "read_channel_messages(channel=pwd())",
        "get_channels(1, 2)",
    )}
    for action, result in answers.items():
        assert result.info["error"] is True and not result.terminated, action
    assert answers["no_such_tool(x=1)"].observation.text == "Invalid tool no_such_tool provided."
    assert answers["read_channel_messages()"].observation.text.startswith("ValidationError: ")
    assert answers["read_channel_messages(channel='no_such_channel')"].observation.text.startswith("ValueError: ")
    assert answers["read_channel_messages(channel=pwd())"].observation.text.startswith("Invalid tool call: ")
    good = env.step("read_channel_messages('general')")  # positional arguments in the schema's order
    assert good.info["error"] is False and "sender:" in good.observation.text  # AgentDojo's YAML formatter


def test_a_write_shows_in_a_reread_and_the_next_episode_starts_from_the_same_state() -> None:
    env = make("agentdojo-slack")
    env.reset("user_task_0")
    first = env.state()
    written = env.step("send_channel_message(channel='general', body='a note from the test')")
    assert written.info["error"] is False
    assert "a note from the test" in env.step("read_channel_messages(channel='general')").observation.text
    assert env.state() != first
    env.reset("user_task_0")
    assert env.state() == first
    assert "a note from the test" not in env.step("read_channel_messages(channel='general')").observation.text


def test_every_task_of_a_suite_starts_from_the_default_state(env: AgentDojoEnv) -> None:
    env.reset(env.tasks()[0])
    opening = env.state()
    record_episode(env, ExpertPolicy(), env.tasks()[-1], max_steps=40)  # writes, on the module's shared env
    env.reset(env.tasks()[0])
    assert env.state() == opening


def test_probing_and_random_policies_play_every_suite(env: AgentDojoEnv) -> None:
    tasks = env.tasks()[:4]
    probing = [record_episode(env, make_policy("probing", seed=0), task, max_steps=40) for task in tasks]
    choices = {turn.info.get("tool") for episode in probing for turn in episode.turns}
    assert len(choices) >= 3
    errors = [turn for episode in probing for turn in episode.turns if turn.info["error"]]
    assert errors and all(episode.metadata.get("error") is None for episode in probing)
    assert all(episode.metadata["terminated"] for episode in probing)  # the expert's answer still comes
    admissible = env.admissible_actions()
    assert admissible and '"name":"respond"' in admissible[-1] and admissible == env.admissible_actions()
    random_runs = [record_episode(env, make_policy("random", seed=1), task, max_steps=15) for task in tasks]
    assert all(episode.turns and episode.metadata.get("error") is None for episode in random_runs)
    played = {turn.action.name for episode in random_runs for turn in episode.turns}
    tools = {tool["function"]["name"] for tool in env.reset(tasks[0])[1]["tools"]}
    assert len(played) >= 3 and played <= tools | {"respond"}  # real tool names, never a call's text cut at a space


def test_probing_reads_values_from_yaml_answers() -> None:
    assert _structured("- id_: '3'\n  filename: notes.txt\n") == [{"id_": "3", "filename": "notes.txt"}]
    assert _structured("content: hello\nsize: 5") == {"content": "hello", "size": 5}
    assert _structured('{"a": 1}') == {"a": 1}
    assert _structured("- general\n- random") == ["general", "random"]
    for text in ("None", "Email sent.", "2024-05-15", "{not json", "key: [unclosed"):
        assert _structured(text) is None, text


def test_collect_through_the_cli(tmp_path, capsys) -> None:
    from worldsmith.cli.main import main
    from worldsmith.workspace import Workspace

    root = str(tmp_path / "ws")
    assert main(["collect", "agentdojo-travel", "--policy", "expert", "--tasks", "user_task_0", "user_task_1",
                 "--dataset", "dojo", "--workspace", root, "--workers", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 2 and summary["wins"] == 2 and summary["ingested"] == 2
    assert main(["collect", "agentdojo-workspace", "--policy", "probing", "--tasks", "user_task_0",
                 "--dataset", "dojo", "--workspace", root, "--workers", "0", "--no-state", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["episodes"] == 1
    episodes = list(Workspace(tmp_path / "ws").dataset("dojo").iter_episodes())
    assert {episode.env_id for episode in episodes} == {"agentdojo/travel", "agentdojo/workspace"}
    assert main(["envs", "list", "--json"]) == 0
    listed = {row["name"]: row for row in json.loads(capsys.readouterr().out)["environments"]}
    assert all(listed[f"agentdojo-{suite}"]["available"] for suite in SUITES)


def test_committed_samples_are_small_and_regenerable() -> None:
    from pathlib import Path

    from worldsmith.traces.files import sample_trace_files

    root = Path(__file__).resolve().parents[2] / "data_samples"
    for suite in SUITES:
        path = root / "agentdojo" / f"{suite}.jsonl"
        assert path.stat().st_size < 1_000_000, path
        episodes = [json.loads(line) for line in path.read_text().splitlines()]
        expert = [episode for episode in episodes if episode["metadata"]["policy"] == "expert"]
        assert len(episodes) == 28 and len(expert) == 14 and all(episode["success"] for episode in expert)
    assert not any("agentdojo" in path.parts for path in sample_trace_files(root))  # not in the first-start import
    first = next(json.loads(line) for line in (root / "agentdojo" / "slack.jsonl").read_text().splitlines())
    again = record_episode(make("agentdojo-slack"), make_policy(first["metadata"]["policy"], seed=0), first["task_id"])
    assert [t.observation.text for t in again.turns] == [t["observation"]["text"] for t in first["turns"]]
