"""`worldsmith ingest --json`, `traces list|show`, `datasets` and `split` with dialogue-only episodes (a
conversation in which the agent called no tool): kept, counted and marked."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import tool_call, write_jsonl
from worldsmith.cli.main import main

TALK = {"id": "talk", "messages": [{"role": "user", "content": "where is my bag?"},
                                   {"role": "assistant", "content": "I cannot track bags."}]}
TOOLS = {"id": "tools", "messages": [
    {"role": "user", "content": "find u1"},
    {"role": "assistant", "tool_calls": [tool_call("k0", "get_user", {"user_id": "u1"})]},
    {"role": "tool", "tool_call_id": "k0", "content": "{\"name\": \"Mia\"}"}]}


@pytest.fixture
def ws(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    root = tmp_path / "ws"
    path = write_jsonl(tmp_path / "chats.jsonl", [TOOLS, TALK, {"id": "nothing", "messages": []}])
    assert main(["ingest", str(path), "--dataset", "chat", "--workspace", str(root), "--json"]) == 0
    summary = orjson.loads(capsys.readouterr().out)
    assert summary["episodes"] == 2 and summary["dialogue_only"] == 1 and summary["turns"] == 1
    assert summary["files"][0]["dialogue_only"] == 1 and summary["empty"] == 1 and summary["rejected"] == 1
    return root


def cli(root: Path, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main([*args, "--workspace", str(root)]) == 0
    return capsys.readouterr().out


def test_traces_list_marks_and_filters_dialogue_only(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    listed = orjson.loads(cli(ws, capsys, "traces", "list", "--dataset", "chat", "--json"))
    assert [(e["episode_id"], e["n_turns"], e["dialogue_only"]) for e in listed["episodes"]] == [
        ("tools", 1, False), ("talk", 0, True)]
    only = orjson.loads(cli(ws, capsys, "traces", "list", "--dataset", "chat", "--dialogue-only", "--json"))
    assert only["total"] == 1 and [e["episode_id"] for e in only["episodes"]] == ["talk"]
    with_turns = orjson.loads(cli(ws, capsys, "traces", "list", "--dataset", "chat", "--with-turns", "--json"))
    assert with_turns["total"] == 1 and [e["episode_id"] for e in with_turns["episodes"]] == ["tools"]
    text = cli(ws, capsys, "traces", "list", "--dataset", "chat")
    talk_line = next(line for line in text.splitlines() if line.startswith("talk") or " talk " in line)
    assert "dialogue only" in talk_line and "2 of 2 episodes" in text
    with pytest.raises(SystemExit) as usage:  # one or the other
        main(["traces", "list", "--dataset", "chat", "--dialogue-only", "--with-turns", "--workspace", str(ws)])
    assert usage.value.code == 2 and "not allowed with" in capsys.readouterr().err


def test_traces_show_datasets_and_split_say_dialogue_only(ws: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shown = cli(ws, capsys, "traces", "show", "talk", "--dataset", "chat")
    assert shown.splitlines()[0] == "episode talk  (dialogue only: no tool call, messages below)"
    assert "[user] where is my bag?" in shown and "[assistant] I cannot track bags." in shown
    assert "dialogue only" not in cli(ws, capsys, "traces", "show", "tools", "--dataset", "chat").splitlines()[0]
    episode = orjson.loads(cli(ws, capsys, "traces", "show", "talk", "--dataset", "chat", "--json"))
    assert episode["turns"] == [] and [m["content"] for m in episode["final_context"]] == [
        "where is my bag?", "I cannot track bags."]
    assert "(1 dialogue only)" in cli(ws, capsys, "datasets")
    stats = orjson.loads(cli(ws, capsys, "datasets", "--json"))["datasets"][0]
    assert stats["episodes"] == 2 and stats["dialogue_only"] == 1
    split = orjson.loads(cli(ws, capsys, "split", "--dataset", "chat", "--ratios", "train=0.5,test=0.5", "--json"))
    assert sum(s["dialogue_only"] for s in split["splits"].values()) == 1
    text = cli(ws, capsys, "split", "--dataset", "chat", "--ratios", "train=0.5,test=0.5")
    assert text.count("(1 dialogue only)") == 1
