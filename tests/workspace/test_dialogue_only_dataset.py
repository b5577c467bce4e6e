"""Issue 29: importing a team's OpenAI conversations keeps every one; those without a tool call are stored as
dialogue-only episodes, counted in the import report, listed, filtered, split, exported and imported again, and
left out of what takes tasks from a dataset."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import tool_call, write_jsonl
from worldsmith import Workspace
from worldsmith.workspace import EpisodeFilter
from worldsmith.workspace.sources import episodes_from

TOTAL, TALKS = 200, 18  # the proportions of the report in the issue


def conversation(index: int) -> dict:
    messages: list[dict] = [{"role": "system", "content": "airline agent"},
                            {"role": "user", "content": f"request {index}"}]
    if index % 11 == 3:  # 18 of 200 (3, 14, 25, ...): the agent only answered in text
        messages.append({"role": "assistant", "content": f"sorry, cannot help with {index}"})
    else:
        for step in range(1 + index % 3):
            messages.append({"role": "assistant", "content": None,
                             "tool_calls": [tool_call(f"c{step}", "get_user", {"user_id": f"u{index}-{step}"})]})
            messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": orjson.dumps({"n": step}).decode()})
    return {"id": f"conv-{index:03d}", "reward": float(index % 2), "messages": messages}


@pytest.fixture
def chats(tmp_path: Path) -> Path:
    rows = [conversation(i) for i in range(TOTAL)]
    assert sum(1 for row in rows if len(row["messages"]) == 3) == TALKS
    return write_jsonl(tmp_path / "team.jsonl", rows)


def test_every_conversation_is_kept_and_the_report_counts_the_dialogues(workspace: Workspace, chats: Path) -> None:
    report = workspace.ingest([chats], "team")
    assert report.committed and report.rejected == 0 and report.rejects == []
    assert report.episodes == TOTAL and report.dialogue_only == TALKS
    summary = report.summary()
    assert summary["dialogue_only"] == TALKS and summary["files"][0]["dialogue_only"] == TALKS
    assert summary["empty"] == 0
    stored = orjson.loads(Path(report.report_path).read_bytes())  # the saved report, as the workbench reads it
    assert stored["files"][0]["dialogue_only"] == TALKS
    assert workspace.dataset("team").reports()[0]["dialogue_only"] == TALKS
    dataset = workspace.dataset("team")
    stats = dataset.stats()
    assert stats["episodes"] == TOTAL and stats["dialogue_only"] == TALKS
    assert stats["turns"] == report.turns == sum(1 + i % 3 for i in range(TOTAL) if i % 11 != 3)


def test_dialogues_are_listed_filtered_and_read_back(workspace: Workspace, chats: Path) -> None:
    workspace.ingest([chats], "team")
    dataset = workspace.dataset("team")
    talk = dataset.episode("conv-003")
    assert talk.dialogue_only and talk.task == "request 3" and talk.env_id == "tools-get_user"
    assert [(c.role, c.content) for c in talk.final_context] == [
        ("system", "airline agent"), ("user", "request 3"), ("assistant", "sorry, cannot help with 3")]
    header, n_turns = dataset.episode_header("conv-003")
    assert n_turns == 0 and header.final_context == talk.final_context
    assert dataset.turns_page("conv-003") == [] and dataset.count_turns("conv-003") == 0
    assert dataset.count_episodes(EpisodeFilter(dialogue_only=True)) == TALKS
    assert dataset.count_episodes(EpisodeFilter(dialogue_only=False)) == TOTAL - TALKS
    assert dataset.count_episodes(EpisodeFilter(max_turns=0)) == TALKS  # the turn filters agree
    assert dataset.count_episodes(EpisodeFilter(dialogue_only=True, outcome="success")) == sum(
        1 for i in range(TOTAL) if i % 11 == 3 and i % 2)
    page = dataset.list_episodes(EpisodeFilter(dialogue_only=True), limit=5)
    assert list(page["episode_id"]) == ["conv-003", "conv-014", "conv-025", "conv-036", "conv-047"]
    assert page["dialogue_only"].all() and (page["n_turns"] == 0).all()
    listed = dataset.list_episodes(limit=TOTAL)
    assert int(listed["dialogue_only"].sum()) == TALKS
    per_action = dataset.query("SELECT count(DISTINCT episode_id) AS n FROM turns")  # turn queries are unchanged
    assert int(per_action["n"][0]) == TOTAL - TALKS
    assert sum(e.dialogue_only for e in dataset.iter_episodes()) == TALKS


@pytest.mark.parametrize("format", ["jsonl", "openai", "trace2env"])
def test_a_dataset_exported_and_imported_again_is_the_same(workspace: Workspace, chats: Path, tmp_path: Path,
                                                           format: str) -> None:
    workspace.ingest([chats], "team")
    out = tmp_path / f"team.{format}.jsonl"
    assert workspace.export("team", format, out) == TOTAL
    again = workspace.ingest([out], "again")
    assert again.episodes == TOTAL and again.dialogue_only == TALKS and again.rejected == 0
    before = {e.id: e.content() for e in workspace.dataset("team").iter_episodes()}
    after = {e.id: e.content() for e in workspace.dataset("again").iter_episodes()}
    assert after == before
    repeat = workspace.ingest([out], "again")  # the same content: every episode, dialogues too, is a duplicate
    assert repeat.duplicates == TOTAL and repeat.episodes == 0 and repeat.dialogue_only == 0


def test_splits_count_the_dialogues_and_task_sources_skip_them(workspace: Workspace, chats: Path) -> None:
    workspace.ingest([chats], "team")
    result = workspace.split("team", {"train": 0.8, "test": 0.2}, seed=1)
    splits = result["splits"]
    assert sum(s["episodes"] for s in splits.values()) == TOTAL
    assert sum(s["dialogue_only"] for s in splits.values()) == TALKS
    dataset = workspace.dataset("team")
    for name, counts in splits.items():
        assert counts["dialogue_only"] == sum(e.dialogue_only for e in dataset.iter_episodes(name))
    tasks = episodes_from([], dataset="team", workspace=workspace.root)
    assert len(tasks) == TOTAL - TALKS and not any(e.dialogue_only for e in tasks)


def test_a_record_with_nothing_in_it_is_still_rejected(workspace: Workspace, tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "odd.jsonl", [
        {"id": "nothing", "messages": []},
        {"id": "unanswered", "messages": [{"role": "assistant", "tool_calls": [tool_call("a", "f", {})]}]},
        {"id": "asked", "messages": [{"role": "user", "content": "help"},
                                     {"role": "assistant", "tool_calls": [tool_call("b", "f", {})]}]},
    ])
    report = workspace.ingest([path], "odd")
    assert report.episodes == 1 and report.dialogue_only == 1 and report.files[0].empty == 2
    reasons = [r["reason"] for r in report.rejects]
    assert reasons[0].startswith("no tool call in this conversation") and "(episode 'nothing')" in reasons[0]
    assert any(reason.startswith("nothing left to import: 1 tool call or result was rejected (see that row)")
               and "'unanswered'" in reason for reason in reasons)  # its only call, rejected: the plain cause
    assert sum("has no result" in reason for reason in reasons) == 2  # the unanswered calls, quarantined as before
    asked = workspace.dataset("odd").episode("asked")  # the call was rejected; the user's message is kept
    assert asked.dialogue_only and [c.content for c in asked.final_context] == ["help"]
