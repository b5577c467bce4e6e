"""Imported chat traces: an environment id from the file's tool set (or chosen), 0-turn conversations
kept as dialogue-only episodes, and the source's episode ids kept (a suffix only on a collision, reported)."""

from __future__ import annotations

from pathlib import Path

import orjson

from helpers import tool_call, write_jsonl
from worldsmith import Workspace
from worldsmith.cli.main import main
from worldsmith.workspace import tool_set_env_id


def conversation(conv_id: str | None, tools: list[str], reward: float | None = None) -> dict:
    messages: list[dict] = [{"role": "user", "content": f"please, {conv_id}"}]
    for i, name in enumerate(tools):
        messages.append({"role": "assistant", "tool_calls": [tool_call(f"k{i}", name, {"i": i})]})
        messages.append({"role": "tool", "tool_call_id": f"k{i}", "content": orjson.dumps({"ok": i}).decode()})
    record: dict = {"messages": messages}
    if conv_id is not None:
        record["id"] = conv_id
    if reward is not None:
        record["reward"] = reward
    return record


def test_the_environment_id_is_stable_and_readable() -> None:
    assert tool_set_env_id(["update_user", "get_user", "get_user"]) == "tools-get_user-update_user"
    assert tool_set_env_id(["b", "a"]) == tool_set_env_id(["a", "b"])
    many = [f"tool_number_{i}" for i in range(20)]
    long_id = tool_set_env_id(many)
    assert long_id.startswith("tools-tool_number_0") and len(long_id) < 70
    assert long_id != tool_set_env_id(many[:-1])


def test_chat_episodes_get_the_environment_of_their_files_tool_set(workspace: Workspace, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [conversation("c1", ["get_user"]), conversation("c2", ["update_user"]),
                                       conversation("named", ["get_user"]) | {"env_id": "airline"}])
    write_jsonl(tmp_path / "b.jsonl", [conversation("d1", ["search"])])
    report = workspace.ingest([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], "chat")
    assert [f.derived_env for f in report.files] == ["tools-get_user-update_user", "tools-search"]
    envs = {e.id: e.env_id for e in workspace.dataset("chat").iter_episodes()}
    assert envs == {"c1": "tools-get_user-update_user", "c2": "tools-get_user-update_user", "named": "airline",
                    "d1": "tools-search"}


def test_an_environment_chosen_on_import_wins(workspace: Workspace, tmp_path: Path, capsys) -> None:
    write_jsonl(tmp_path / "a.jsonl", [conversation("c1", ["get_user"])])
    assert main(["ingest", str(tmp_path / "a.jsonl"), "--dataset", "chat", "--env", "airline",
                 "--workspace", str(workspace.root), "--json"]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["files"][0]["derived_env"] is None
    assert [e.env_id for e in workspace.dataset("chat").iter_episodes()] == ["airline"]


def test_zero_turn_conversations_are_kept_as_dialogue_only_and_counted(workspace: Workspace, tmp_path: Path,
                                                                       capsys) -> None:
    write_jsonl(tmp_path / "a.jsonl", [conversation("c1", ["get_user"]), conversation("chat-only", []),
                                       {"id": "nothing", "messages": []}])
    assert main(["ingest", str(tmp_path / "a.jsonl"), "--dataset", "chat", "--workspace", str(workspace.root)]) == 0
    out = capsys.readouterr().out
    assert "2 episodes" in out and "1 dialogue only (no tool call)" in out and "1 empty (nothing kept)" in out
    report = workspace.ingest([tmp_path / "a.jsonl"], "other")
    summary = report.summary()
    assert summary["episodes"] == 2 and summary["dialogue_only"] == 1 and summary["files"][0]["dialogue_only"] == 1
    assert summary["empty"] == 1 and summary["rejected"] == 1  # a conversation without any message: nothing to keep
    assert [r["reason"] for r in report.rejects] == [
        "no tool call in this conversation, and no message text to keep as a dialogue (episode 'nothing')"]
    chat_only = workspace.dataset("other").episode("chat-only")
    assert chat_only.dialogue_only and chat_only.env_id == "tools-get_user"  # the environment of its file


def test_ids_keep_the_source_and_a_collision_gets_a_reported_suffix(workspace: Workspace, tmp_path: Path) -> None:
    upload = workspace.save_upload("airline logs.jsonl", b"")
    write_jsonl(upload, [conversation(None, ["get_user"]), conversation("c1", ["get_user"])])
    first = workspace.ingest([upload], "chat")
    assert sorted(e.id for e in workspace.dataset("chat").iter_episodes()) == ["airline_logs-1", "c1"]
    assert first.summary()["renamed"] == 0
    write_jsonl(tmp_path / "again.jsonl", [conversation("c1", ["update_user"])])  # same id, other content
    second = workspace.ingest([tmp_path / "again.jsonl"], "chat")
    assert second.summary()["renamed"] == 1
    ids = sorted(e.id for e in workspace.dataset("chat").iter_episodes())
    assert ids[:2] == ["airline_logs-1", "c1"] and ids[2].startswith("c1~") and len(ids) == 3


def test_the_listed_success_is_the_outcome_the_stats_count(workspace: Workspace, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "a.jsonl", [conversation("won", ["a"], reward=1.0), conversation("lost", ["a"], reward=0.0),
                                       conversation("flagged", ["a"], reward=0.0) | {"success": True},
                                       conversation("unknown", ["a"])])
    workspace.ingest([tmp_path / "a.jsonl"], "chat")
    dataset = workspace.dataset("chat")
    listed = dataset.list_episodes()
    success = {row.episode_id: (None if row.success is None else bool(row.success))
               for row in listed.astype({"success": object}).where(listed.notna(), None).itertuples()}
    assert success == {"won": True, "lost": False, "flagged": True, "unknown": None}
    assert dataset.stats()["successes"] == sum(1 for value in success.values() if value)
