"""The mcp environment on real MCP servers: mcp-server-time and mcp-server-sqlite over stdio (the latter with a reset
command restoring its database file), and a notes server on the SDK over streamable HTTP."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytest.importorskip("mcp", reason="the mcp environment needs the MCP SDK (pip install 'worldsmith[serve]')")

from mcp_testbeds import SQLITE_SERVER  # noqa: E402
from ports import free_port  # noqa: E402
from worldsmith.envs import EnvError, ExpertPolicy, UnknownTaskError, check_env, make, make_policy, record_episode  # noqa: E402
from worldsmith.envs.mcp import McpEnv, McpServerError, load_tasks  # noqa: E402
from worldsmith.traces.model import Action  # noqa: E402
from worldsmith.util.errors import BadInputError, NotFoundError  # noqa: E402

TIME_SERVER = Path(sys.prefix) / "bin" / "mcp-server-time"
NOTES_SERVER = Path(__file__).with_name("mcp_notes_server.py")

TIME_TASKS = [
    {"id": "paris", "instruction": "What time is it in Paris?",
     "ground_truth": [{"name": "get_current_time", "arguments": {"timezone": "Europe/Paris"}}]},
    {"id": "tokyo", "instruction": "Convert 16:30 in Paris to Tokyo time.", "answer": "00:30 the next day",
     "ground_truth": [{"name": "convert_time", "arguments": {"source_timezone": "Europe/Paris", "time": "16:30",
                                                             "target_timezone": "Asia/Tokyo"}}]},
]
SQLITE_TASKS = [
    {"id": "count-users", "instruction": "How many users are there?", "answer": "3",
     "ground_truth": [{"name": "list_tables", "arguments": {}},
                      {"name": "read_query", "arguments": {"query": "SELECT COUNT(*) AS n FROM users"}}]},
    {"id": "add-user", "instruction": "Add Alan from Manchester and show his record.",
     "ground_truth": [{"name": "write_query", "arguments": {"query": "INSERT INTO users(name, city) VALUES "
                                                                    "('Alan', 'Manchester')"}},
                      {"name": "read_query", "arguments": {"query": "SELECT * FROM users WHERE name = 'Alan'"}}]},
]


def _write_tasks(path: Path, tasks: list[dict], jsonl: bool = True) -> Path:
    path.write_text("\n".join(json.dumps(task) for task in tasks) if jsonl else json.dumps(tasks))
    return path


def _need(program: Path) -> None:
    if not program.exists():
        pytest.skip(f"{program} is not installed (make install)")


@pytest.fixture(scope="module")
def time_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[McpEnv]:
    _need(TIME_SERVER)
    tasks = _write_tasks(tmp_path_factory.mktemp("time") / "tasks.jsonl", TIME_TASKS)
    env = make("mcp", command=str(TIME_SERVER), tasks=str(tasks))
    assert isinstance(env, McpEnv)
    yield env
    env.close()


@pytest.fixture
def sqlite_dir(tmp_path: Path) -> Path:
    """A database file to restore (`base.db`), the tasks, and the server's working copy `work.db` (not yet made)."""
    _need(SQLITE_SERVER)
    with sqlite3.connect(tmp_path / "base.db") as connection:
        connection.execute("CREATE TABLE users(id INTEGER PRIMARY KEY, name TEXT, city TEXT)")
        connection.executemany("INSERT INTO users(name, city) VALUES (?, ?)",
                               [("Ada", "London"), ("Linus", "Helsinki"), ("Grace", "Arlington")])
    _write_tasks(tmp_path / "tasks.json", SQLITE_TASKS, jsonl=False)
    return tmp_path


def _sqlite_env(folder: Path, *, reset: bool = True) -> McpEnv:
    env = make("mcp", command=[str(SQLITE_SERVER), "--db-path", str(folder / "work.db")],
               tasks=str(folder / "tasks.json"),
               reset=["cp", str(folder / "base.db"), str(folder / "work.db")] if reset else None)
    assert isinstance(env, McpEnv)
    return env


# -- tasks files (no server) ------------------------------------------------------------------


def test_tasks_files_load_as_json_or_jsonl_and_bad_ones_name_the_line_and_field(tmp_path: Path) -> None:
    assert [t.id for t in load_tasks(_write_tasks(tmp_path / "a.jsonl", TIME_TASKS))] == ["paris", "tokyo"]
    assert [t.id for t in load_tasks(_write_tasks(tmp_path / "b.json", TIME_TASKS, jsonl=False))] == ["paris", "tokyo"]
    (tmp_path / "c.json").write_text(json.dumps({"tasks": TIME_TASKS}))
    assert load_tasks(tmp_path / "c.json")[1].ground_truth[0].name == "convert_time"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(TIME_TASKS[0]) + "\n\n" + json.dumps({"id": "x"}) + "\n")
    with pytest.raises(BadInputError, match=r"bad\.jsonl:3: instruction: Field required"):
        load_tasks(bad)
    bad.write_text(json.dumps(TIME_TASKS[0]) + "\n{not json\n")
    with pytest.raises(BadInputError, match=r"bad\.jsonl:2: not JSON"):
        load_tasks(bad)
    bad.write_text(json.dumps([TIME_TASKS[0], TIME_TASKS[0]]))
    with pytest.raises(BadInputError, match=r"task 1: task id 'paris' appears twice"):
        load_tasks(bad)
    bad.write_text(json.dumps([{**TIME_TASKS[0], "ground_truth": [{"arguments": {}}]}]))
    with pytest.raises(BadInputError, match=r"task 0: ground_truth\.0\.name: Field required"):
        load_tasks(bad)
    bad.write_text("")
    with pytest.raises(BadInputError, match="no tasks"):
        load_tasks(bad)
    with pytest.raises(NotFoundError, match="no_such.jsonl"):
        load_tasks(tmp_path / "no_such.jsonl")


def test_a_server_is_a_command_or_a_url() -> None:
    with pytest.raises(BadInputError, match="a command .* or a url"):
        McpEnv()
    with pytest.raises(BadInputError, match="not both"):
        McpEnv(command="x", url="http://127.0.0.1:1/mcp")
    with pytest.raises(BadInputError, match="expected http"):
        McpEnv(url="ftp://example.invalid/mcp")


# -- bad servers ------------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_a_bad_command_or_url_names_it_and_says_why(tmp_path: Path) -> None:
    with pytest.raises(McpServerError, match=r"command `/no/such/server --flag`: FileNotFoundError"):
        McpEnv(command="/no/such/server --flag")
    crashing = [sys.executable, "-c", "import sys; sys.stderr.write('boom: no database\\n'); sys.exit(3)"]
    with pytest.raises(McpServerError, match=r"cannot start the MCP server command .*boom: no database"):
        McpEnv(command=crashing)
    url = f"http://127.0.0.1:{free_port()}/mcp"
    with pytest.raises(McpServerError, match=f"MCP server at {url}"):
        McpEnv(url=url, connect_timeout=10)
    with pytest.raises(NotFoundError, match="missing.jsonl"):  # the tasks file is read before any server starts
        McpEnv(command="/no/such/server", tasks=str(tmp_path / "missing.jsonl"))


# -- mcp-server-time --------------------------------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_time_server_episodes_carry_its_tools_and_a_stable_id(time_env: McpEnv) -> None:
    check_env(time_env, "paris")
    assert time_env.tasks() == ["paris", "tokyo"]
    observation, info = time_env.reset("tokyo")
    assert observation.text == info["task"] == TIME_TASKS[1]["instruction"]
    assert info["env_id"] == "mcp/mcp-time" and info["server"]["name"] == "mcp-time"
    names = [tool["function"]["name"] for tool in info["tools"]]
    assert names == ["get_current_time", "convert_time"]
    assert info["tools"][1]["function"]["parameters"]["required"] == ["source_timezone", "time", "target_timezone"]
    assert time_env.reset("paris")[1]["tools"] == info["tools"]
    json.dumps(info)
    with pytest.raises(UnknownTaskError, match="unknown MCP task 'berlin'"):
        time_env.reset("berlin")


@pytest.mark.integration
@pytest.mark.slow
def test_the_expert_plays_the_ground_truth_and_wins(time_env: McpEnv) -> None:
    episode = record_episode(time_env, ExpertPolicy(), "tokyo", max_steps=10)
    assert episode.success is True and episode.reward == 1.0 and episode.env_id == "mcp/mcp-time"
    (turn,) = episode.turns
    assert turn.action.name == "convert_time" and turn.info == {"tool": "convert_time", "error": False}
    answer = json.loads(turn.observation.text)
    assert answer["target"]["datetime"].endswith("T00:30:00+09:00") and answer["time_difference"] == "+8.0h"
    assert episode.final_context[-1].content == "00:30 the next day"  # the expert's answer, as a hand-over


@pytest.mark.integration
@pytest.mark.slow
def test_errors_are_error_observations_and_every_spelling_is_one_call(time_env: McpEnv) -> None:
    time_env.reset("paris")
    answers = {action: time_env.step(action) for action in (
        "no_such_tool(x=1)", "get_current_time(timezone='Nowhere/Atlantis')", "get_current_time()", "hello there",
        "get_current_time('Asia/Tokyo')", 'get_current_time {"timezone": "Asia/Tokyo"}',
        '{"name": "get_current_time", "arguments": {"timezone": "Asia/Tokyo"}}',
    )}
    unknown = answers["no_such_tool(x=1)"]
    assert unknown.info["error"] is True and "protocol_error" in unknown.info and "no_such_tool" in unknown.observation.text
    assert answers["get_current_time(timezone='Nowhere/Atlantis')"].info == {"tool": "get_current_time", "error": True}
    assert "Invalid timezone" in answers["get_current_time(timezone='Nowhere/Atlantis')"].observation.text
    assert answers["get_current_time()"].info["error"] is True
    assert answers["hello there"].observation.text.startswith("Invalid tool call: not a tool call")
    spelled = [json.loads(answers[key].observation.text)["timezone"] for key in list(answers)[-3:]]
    assert spelled == ["Asia/Tokyo"] * 3
    structured = time_env.step(Action(name="get_current_time", arguments={"timezone": "Etc/UTC"}))
    assert json.loads(structured.observation.text)["timezone"] == "Etc/UTC"
    over = time_env.step(Action(name="respond", arguments={"text": "it is late"}))
    assert over.terminated and over.info["record"] is False and over.info["won"] is False  # ground truth not played
    with pytest.raises(EnvError, match="over"):
        time_env.step("get_current_time('Etc/UTC')")


@pytest.mark.integration
@pytest.mark.slow
def test_probing_and_random_policies_act_from_the_schemas(time_env: McpEnv) -> None:
    probing = record_episode(time_env, make_policy("probing", seed=0), "paris", max_steps=12)
    assert probing.metadata.get("error") is None and len(probing.turns) >= 3
    assert any(turn.info["error"] for turn in probing.turns) and any(not turn.info["error"] for turn in probing.turns)
    time_env.reset("paris")
    admissible = time_env.admissible_actions()
    assert admissible is not None and admissible[-1] == '{"name":"respond","arguments":{"text":""}}'
    assert {json.loads(action)["name"] for action in admissible} == {"get_current_time", "convert_time", "respond"}
    assert '{"name":"get_current_time","arguments":{"timezone":"Europe/Paris"}}' in admissible  # a task's value
    played = record_episode(time_env, make_policy("random", seed=3), "paris", max_steps=6)
    assert played.turns and played.metadata.get("error") is None
    assert {turn.action.name for turn in played.turns} <= {"get_current_time", "convert_time"}


# -- mcp-server-sqlite, with a reset command --------------------------------------------------


@pytest.mark.integration
@pytest.mark.slow
def test_the_reset_command_restores_the_database_before_every_episode(sqlite_dir: Path) -> None:
    env = _sqlite_env(sqlite_dir)
    try:
        assert env.env_id == "mcp/sqlite"
        first, again = (record_episode(env, ExpertPolicy(), "add-user", max_steps=5) for _ in range(2))
        assert first.success is True and again.success is True
        assert [t.observation.text for t in first.turns] == [t.observation.text for t in again.turns]
        assert "'id': 4, 'name': 'Alan'" in first.turns[-1].observation.text
        counted = record_episode(env, ExpertPolicy(), "count-users", max_steps=5)
        assert counted.turns[-1].observation.text == "[{'n': 3}]"  # Alan is gone again
    finally:
        env.close()
    kept = _sqlite_env(sqlite_dir, reset=False)  # without a reset, a write outlives its episode
    try:
        record_episode(kept, ExpertPolicy(), "add-user", max_steps=5)
        assert record_episode(kept, ExpertPolicy(), "count-users", max_steps=5).turns[-1].observation.text == \
            "[{'n': 4}]"  # Alan stayed: 3 users and him
    finally:
        kept.close()


@pytest.mark.integration
@pytest.mark.slow
def test_a_failing_reset_command_names_itself(sqlite_dir: Path) -> None:
    with pytest.raises(EnvError, match=r"the reset command `cp .*no_such\.db .*` failed \(exit code 1\): cp: "):
        make("mcp", command=[str(SQLITE_SERVER), "--db-path", str(sqlite_dir / "work.db")],
             reset=["cp", str(sqlite_dir / "no_such.db"), str(sqlite_dir / "work.db")])
    with pytest.raises(EnvError, match="no such program 'no-such-program'"):
        make("mcp", command=[str(SQLITE_SERVER), "--db-path", str(sqlite_dir / "work.db")], reset="no-such-program --now")
    env = make("mcp", command=[str(SQLITE_SERVER), "--db-path", str(sqlite_dir / "work.db")])
    try:
        assert env.tasks() == ["open"]
        assert env.reset()[0].text == "Use the tools of the MCP server sqlite."
    finally:
        env.close()


@pytest.mark.integration
@pytest.mark.slow
def test_collect_explore_and_replay_through_the_cli(sqlite_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from worldsmith.cli.main import main
    from worldsmith.workspace import Workspace

    root = str(sqlite_dir / "ws")
    server = ["--server-command", f"{SQLITE_SERVER} --db-path {sqlite_dir / 'work.db'}", "--server-tasks",
              str(sqlite_dir / "tasks.json"), "--server-reset", f"cp {sqlite_dir / 'base.db'} {sqlite_dir / 'work.db'}"]
    assert main(["collect", "mcp", *server, "--dataset", "sq", "--workspace", root, "--workers", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["episodes"] == 2 and summary["wins"] == 2 and summary["ingested"] == 2
    episodes = {episode.task_id: episode for episode in Workspace(root).dataset("sq").iter_episodes()}
    assert {episode.env_id for episode in episodes.values()} == {"mcp/sqlite"}
    recorded = episodes["add-user"].metadata["env"]
    assert recorded["name"] == "mcp" and recorded["kwargs"]["tasks"] == str(sqlite_dir / "tasks.json")

    assert main(["replay", "mcp", "--episode", episodes["add-user"].id, "--dataset", "sq", "--workspace", root,
                 "--json"]) == 0  # the server is rebuilt from what the episode recorded
    assert json.loads(capsys.readouterr().out)["reproduced"] is True

    assert main(["explore", "mcp", *server, "--book", "sqbook", "--budget", "8", "--rounds", "2", "--dataset", "ex",
                 "--workspace", root, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["steps"] == 8 and len(report["rounds_detail"]) == 2
    explored = list(Workspace(root).dataset("ex").iter_episodes())
    assert explored and all(episode.env_id == "mcp/sqlite" for episode in explored)
    assert {turn.action.name for episode in explored for turn in episode.turns} >= {"read_query"}


@pytest.mark.integration
@pytest.mark.slow
def test_cli_errors_name_the_bad_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from worldsmith.cli.main import main

    root = str(tmp_path / "ws")
    assert main(["collect", "mcp", "--server-command", "/no/such/server", "--dataset", "d", "--workspace", root]) != 0
    assert "/no/such/server" in capsys.readouterr().err
    (tmp_path / "t.jsonl").write_text('{"id": "a"}\n')
    assert main(["explore", "mcp", "--server-command", "/no/such/server", "--server-tasks", str(tmp_path / "t.jsonl"),
                 "--book", "b", "--budget", "2", "--rounds", "1", "--workspace", root]) == 3
    assert "t.jsonl:1: instruction: Field required" in capsys.readouterr().err
    assert main(["collect", "toolshop", "--server-url", "http://127.0.0.1:1/mcp", "--dataset", "d",
                 "--workspace", root]) != 0
    assert "--server-url: only for the environment mcp" in capsys.readouterr().err


@pytest.mark.integration
@pytest.mark.slow
def test_a_server_that_dies_mid_episode_ends_it_with_the_error_recorded(tmp_path: Path) -> None:
    env = make("mcp", command=[sys.executable, str(NOTES_SERVER), "stdio", str(tmp_path / "notes.json")])
    try:
        env.reset()
        assert env.step("add_note(title='a', body='b')").info["error"] is False
        with pytest.raises(EnvError, match=r"the MCP server command `.*mcp_notes_server\.py stdio .*` failed on crash"):
            env.step("crash()")
        episode = record_episode(env, make_policy("replay", actions=["list_notes()", "crash()", "list_notes()"]),
                                 "open", max_steps=5)  # a new session: a new server process
        assert [turn.observation.text for turn in episode.turns] == ['[{"id": "n1", "title": "a"}]']
        assert "failed on crash" in episode.metadata["error"] and episode.success is False
    finally:
        env.close()


# -- a server at a URL ------------------------------------------------------------------------


@pytest.fixture
def notes_url(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen([sys.executable, str(NOTES_SERVER), str(port), str(tmp_path / "notes.json")],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, "the notes server exited"
            try:
                httpx.get(url, timeout=2.0)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "the notes server did not start"
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        process.wait(10)


@pytest.mark.integration
@pytest.mark.slow
def test_a_server_at_a_url_gets_a_session_per_episode(notes_url: str, tmp_path: Path) -> None:
    tasks = _write_tasks(tmp_path / "tasks.jsonl", [{
        "id": "note", "instruction": "Write a note and read it back.",
        "ground_truth": [{"name": "add_note", "arguments": {"title": "milk", "body": "buy milk"}},
                         {"name": "get_note", "arguments": {"note_id": "n1"}}]}])
    env = make("mcp", url=notes_url, tasks=str(tasks), reset=["rm", "-f", str(tmp_path / "notes.json")])
    try:
        _, info = env.reset("note")
        assert info["env_id"] == "mcp/notes"
        assert [tool["function"]["name"] for tool in info["tools"]] == ["add_note", "list_notes", "get_note"]
        episodes = [record_episode(env, ExpertPolicy(), "note", max_steps=5) for _ in range(2)]
        assert all(episode.success for episode in episodes)
        assert json.loads(episodes[1].turns[-1].observation.text) == {"id": "n1", "title": "milk", "body": "buy milk"}
        env.reset("note")
        missing = env.step("get_note(note_id='n7')")
        assert missing.info["error"] is True and "get_note" in missing.observation.text
        probing = record_episode(env, make_policy("probing", seed=1), "note", max_steps=10)
        assert probing.metadata.get("error") is None and len(probing.turns) >= 2
    finally:
        env.close()


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.parametrize("protocol", ["live", "w2r"])
def test_live_and_w2r_act_on_the_server_the_episodes_recorded(sqlite_dir: Path, protocol: str) -> None:
    """Held-out episodes name their server (command, tasks, reset) in their metadata: the live protocol and W2R
    rebuild it from there and act on it for real."""
    from worldsmith.envs.collect import CollectConfig, collect
    from worldsmith.evals import EvalConfig, run_eval
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook import build_worldbook

    workspace = Workspace(sqlite_dir / "ws")
    env_kwargs = {"command": f"{SQLITE_SERVER} --db-path {sqlite_dir / 'work.db'}",
                  "tasks": str(sqlite_dir / "tasks.json"), "reset": f"cp {sqlite_dir / 'base.db'} {sqlite_dir / 'work.db'}"}
    collect(workspace, "sq", CollectConfig(env="mcp", policy="expert", workers=0, env_kwargs=env_kwargs))
    episodes = {episode.task_id: episode for episode in workspace.dataset("sq").iter_episodes()}
    held_out = [episodes["add-user"]]
    built = [episodes["count-users"]]  # the book never saw the write: its answers may be wrong, the reference not
    book = build_worldbook(built, name="sq").book
    config = EvalConfig(name=f"sq-{protocol}", book="sq", dataset="sq", methods=["harness"], protocol=protocol,
                        policy="expert", max_steps=6, resamples=100, seed=0)
    run = run_eval(config, sqlite_dir / "ws", book=book, episodes=held_out, construction=built)
    records = run.records
    assert set(records["protocol"]) == {protocol} and set(records["episode_id"]) == {held_out[0].id}
    if protocol == "live":  # the real server answered the expert's calls exactly as it did when recorded
        assert records.sort_values("turn")["reference"].tolist() == [t.observation.text for t in held_out[0].turns]
    else:
        assert records["real_success"].tolist() == [True]
