"""The proxy's journal (a session's calls, synced one by one, one episode at the end), what a hybrid proxy may
answer from the book, and the proxy's configuration: without servers."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from worldsmith.serve.proxy import ProxyConfig
from worldsmith.serve.proxy_journal import CallRecord, SessionJournal, SessionOrigin, journal_dir, recover_journals
from worldsmith.serve.state_changes import state_changes
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import Workspace, tool_set_env_id

TOOLS = [{"name": "get_item", "inputSchema": {"type": "object"}}, {"name": "set_item", "inputSchema": {"type": "object"}}]


def _origin(session: str) -> SessionOrigin:
    return SessionOrigin(session=session, run="run-1", upstream="server --db x", tools=TOOLS, started=time.time())


def _call(tool: str, text: str) -> CallRecord:
    return CallRecord(tool=tool, arguments={"id": "a@b.example"}, text=text, started=time.time(), latency_s=0.01)


def test_a_finished_session_is_one_episode_of_the_upstreams_tool_set(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    journal = SessionJournal(journal_dir(workspace, "d"), _origin("s1"))
    journal.record(_call("get_item", "{\"id\": 1}"))
    journal.record(_call("set_item", "done"))
    episode = journal.finish(workspace, "d")
    assert episode is not None and not journal.path.exists()
    stored = list(workspace.dataset("d").iter_episodes())
    assert [e.id for e in stored] == [episode.id]
    assert stored[0].env_id == tool_set_env_id(["get_item", "set_item"])
    assert [t.action.name for t in stored[0].turns] == ["get_item", "set_item"]
    assert stored[0].metadata["partial"] is False and stored[0].metadata["proxy"]["upstream"] == "server --db x"


def test_a_killed_sessions_journal_is_kept_as_a_partial_episode_less_the_call_in_flight(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    journal = SessionJournal(journal_dir(workspace, "d"), _origin("s2"))
    journal.record(_call("get_item", "one"))
    journal.record(_call("set_item", "two"))
    journal._handle.write(b'{"tool": "get_item", "argu')  # the kill came while this line was being written
    journal._handle.flush()
    live = list(recover_journals(workspace, "d"))  # still held by its (live) writer: left alone
    assert live == [] and journal.path.exists()
    journal.close()  # the writer is gone, as a SIGKILL leaves it
    recovered = recover_journals(workspace, "d")
    assert [len(e.turns) for e in recovered] == [2] and recovered[0].metadata["partial"] is True
    assert [e.metadata["partial"] for e in workspace.dataset("d").iter_episodes()] == [True]
    assert not journal.path.exists()


def test_recorded_text_passes_the_redactor_before_it_is_written(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path)
    journal = SessionJournal(journal_dir(workspace, "d"), _origin("s3"),
                             redact=lambda text: text.replace("a@b.example", "<email-1>"))
    journal.record(_call("get_item", "owner a@b.example"))
    assert b"a@b.example" not in journal.path.read_bytes()
    journal.close()


def test_a_file_that_is_not_a_journal_is_named(tmp_path: Path) -> None:
    folder = journal_dir(Workspace(tmp_path), "d")
    folder.mkdir(parents=True)
    (folder / "x.jsonl").write_text('{"not": "a journal"}\n')
    with pytest.raises(BadInputError, match=r"x\.jsonl:1: not a worldsmith proxy journal"):
        recover_journals(Workspace(tmp_path), "d")


def _episode(index: int) -> Episode:
    turns = [
        Turn(index=0, action=Action(name="get_item", arguments={"id": f"i{index}"}),
             observation=Observation(text=f'{{"id": "i{index}", "qty": {index}}}')),
        Turn(index=1, action=Action(name="set_item", arguments={"id": f"i{index}", "qty": index + 1}),
             observation=Observation(text=f'{{"id": "i{index}", "qty": {index + 1}}}')),
        Turn(index=2, action=Action(name="get_item", arguments={"id": f"i{index}"}),
             observation=Observation(text=f'{{"id": "i{index}", "qty": {index + 1}}}')),
    ]
    return Episode(id=f"e{index}", env_id="items", turns=turns)


def test_only_tools_known_to_read_may_be_answered_and_learned_writes_win() -> None:
    book = build_simulator_book([_episode(i) for i in range(6)], name="items").book
    declared = [{"name": "get_item", "annotations": {"readOnlyHint": True}},
                {"name": "set_item", "annotations": {"readOnlyHint": True}},  # a wrong hint: the book knows better
                {"name": "drop_all", "annotations": {"readOnlyHint": True}}]
    changes = state_changes(book, declared)
    assert not changes.may_change("get_item")
    assert changes.may_change("drop_all") and "never seen" in changes.reason("drop_all")
    assert changes.may_change("unknown_tool")
    assert state_changes(book, [{"name": "get_item", "annotations": {"destructiveHint": True}}]).may_change("get_item")
    assert not state_changes(book, [{"name": "get_item"}], ["get_item"]).may_change("get_item")  # you said so
    assert state_changes(book, [{"name": "set_item"}], ["set_item"]).may_change("set_item")  # learned: it writes


def test_the_config_names_what_each_mode_needs() -> None:
    with pytest.raises(ValidationError, match="record records into a dataset"):
        ProxyConfig(mode="record", upstream_command=["server"])
    with pytest.raises(ValidationError, match="replay has no upstream"):
        ProxyConfig(mode="replay", book="b", upstream_url="http://127.0.0.1:1/mcp")
    with pytest.raises(ValidationError, match="hybrid needs one upstream"):
        ProxyConfig(mode="hybrid", book="b", dataset="d")
    assert ProxyConfig(mode="record", dataset="d", upstream_command=["a", "b c"]).upstream == "a 'b c'"


def test_a_tool_whose_answers_hold_no_record_is_no_read() -> None:
    """`write_query` answers `[{'affected_rows': 1}]` (a Python literal: data, but no record): it never showed a
    record unchanged, so nothing says it only reads; `get_item` showed its records unchanged."""
    episodes = [_episode(i).model_copy(update={"turns": [*_episode(i).turns, Turn(
        index=3, action=Action(name="write_query", arguments={"query": f"INSERT {i}"}),
        observation=Observation(text="[{'affected_rows': 1}]"))]}) for i in range(6)]
    book = build_simulator_book(episodes, name="items").book
    changes = state_changes(book, [{"name": "get_item"}, {"name": "write_query"}])
    assert changes.may_change("write_query") and not changes.may_change("get_item")
