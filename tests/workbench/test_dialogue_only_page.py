"""The Traces page under AppTest with a dialogue-only episode (a conversation without a tool call): listed and
marked, filtered and counted, its messages shown as the transcript."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE, shown

from worldsmith.workspace import Workspace

pytestmark = pytest.mark.slow  # runs the Traces page

TIMEOUT = 30
TALK = {"id": "talk", "reward": 0.0, "messages": [
    {"role": "system", "content": "You are a support agent."},
    {"role": "user", "content": "my booking vanished"},
    {"role": "assistant", "content": "I am sorry, I cannot look bookings up."}]}


def _call(i: int) -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": f"k{i}", "type": "function", "function": {"name": "get_user", "arguments": '{"user_id": "u1"}'}}]},
            {"role": "tool", "tool_call_id": f"k{i}", "content": '{"name": "Mia"}'}]


TOOLS = {"id": "tools", "reward": 1.0, "messages": [{"role": "user", "content": "find u1"}, *_call(0), *_call(1)]}


@pytest.fixture
def dialogue_root(empty_root: Path, tmp_path: Path) -> Path:
    path = tmp_path / "support.jsonl"
    rows = [TOOLS, TALK]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    report = Workspace(empty_root).ingest([path], "support")
    assert report.committed and report.dialogue_only == 1 and report.rejected == 0
    return empty_root


def traces(**query: str) -> AppTest:
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=TIMEOUT)
    for key, value in query.items():
        at.query_params[key] = value
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def episode_table(at: AppTest):
    tables = [df for df in at.dataframe if df.key and df.key.startswith("tr_episodes_")]
    assert len(tables) == 1, [df.key for df in at.dataframe]
    return tables[0].value


def test_a_dialogue_only_episode_is_listed_marked_and_counted(dialogue_root: Path) -> None:
    at = traces(dataset="support")
    table = episode_table(at)
    assert list(table["episode_id"]) == ["tools", "talk"]
    assert list(table["dialogue_only"]) == [False, True] and list(table["n_turns"]) == [2, 0]
    metrics = {m.label: m.value for m in at.metric}
    assert metrics["Episodes"] == "2" and metrics["Turns"] == "2" and metrics["Dialogue only"] == "1"
    at.selectbox(key="tr_f_tools").set_value("dialogue only").run()
    assert list(episode_table(at)["episode_id"]) == ["talk"]
    assert any("Episodes 1–1 of 1" in str(c.value) for c in at.caption)
    at.selectbox(key="tr_f_tools").set_value("with tool calls").run()
    assert list(episode_table(at)["episode_id"]) == ["tools"]
    at.selectbox(key="tr_f_tools").set_value("any").run()
    at.number_input(key="tr_f_max").set_value(0).run()  # the turn filters still count a dialogue as 0 turns
    assert list(episode_table(at)["episode_id"]) == ["talk"]


def test_a_dialogue_only_episode_reads_as_its_messages(dialogue_root: Path) -> None:
    at = traces(dataset="support", episode="talk")
    assert any(shown(m.value) == "dialogue only" for m in at.metric if m.label == "Turns")
    assert any("Dialogue only: the agent called no tool" in str(i.value) for i in at.info)
    assert not any("has no turns" in str(i.value) for i in at.info)
    messages = at.get("chat_message")
    assert [m.proto.name for m in messages] == ["system", "user", "assistant"]
    texts = ["\n".join(str(t.value) for t in m.text) for m in messages]
    assert texts == ["You are a support agent.", "my booking vanished", "I am sorry, I cannot look bookings up."]
    assert any(str(c.value) == "Messages" for c in at.caption)
    at.segmented_control(key="tr_view").set_value("Cards").run()  # the folded view opens them
    assert not at.exception
    messages_box = next(e for e in at.expander if e.label == "Messages")
    assert "my booking vanished" in "\n".join(str(t.value) for t in messages_box.text)


def test_the_import_view_counts_dialogue_only(empty_root: Path) -> None:
    at = traces()
    upload = "".join(json.dumps(row) + "\n" for row in (TOOLS, TALK)).encode()
    at.file_uploader[0].set_value(("support.jsonl", upload, "application/json"))
    at.text_input(key="tr_import_dataset").input("support")
    at.run()
    at.button(key="tr_import_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    summary = at.session_state["tr_last_report"]
    assert summary["committed"] and summary["episodes"] == 2 and summary["dialogue_only"] == 1
    assert any("1 of them dialogue only (no tool call)" in shown(s.value) for s in at.success)
    assert {m.label: m.value for m in at.metric}["Dialogue only"] == "1"
    files = next(df.value for df in at.dataframe if "dialogue only" in df.value.columns and "format" in df.value.columns)
    assert list(files["dialogue only"]) == [1] and list(files["episodes"]) == [2]
    assert list(episode_table(at)["episode_id"]) == ["tools", "talk"]
    history = next(e for e in at.expander if "Import history" in e.label)
    assert list(history.dataframe[0].value["dialogue only"]) == [1]
