"""JSON observations diffed as JSON: fields added, removed and changed, by JSON pointer; and `traces diff`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import tool_call, write_jsonl
from worldsmith import Workspace
from worldsmith.cli.main import main
from worldsmith.traces import JsonChange, json_changes, json_text_changes, observation_diff
from worldsmith.traces.json_diff import apply_changes


def test_fields_added_removed_and_changed_are_named_by_pointer() -> None:
    before = {"user": {"name": "Mia", "balance": 10}, "items": ["a", "b", "c"], "gone": True}
    after = {"user": {"name": "Mia", "balance": 7, "vip": True}, "items": ["a", "c"]}
    changes = json_changes(before, after)
    assert JsonChange("/user/balance", "changed", 10, 7) in changes
    assert JsonChange("/user/vip", "added", after=True) in changes
    assert JsonChange("/gone", "removed", before=True) in changes
    assert JsonChange("/items/1", "removed", before="b") in changes
    assert len(changes) == 4
    assert json_changes(before, before) == []


def test_texts_that_are_not_both_json_give_none() -> None:
    assert json_text_changes('{"a": 1}', '{"a": 2}') == [JsonChange("/a", "changed", 1, 2)]
    assert json_text_changes('{"a": 1}', "plain text") is None
    assert json_text_changes(None, '{"a": 1}') is None


def test_traces_diff_compares_two_turns(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workspace = Workspace(tmp_path / "ws")
    messages: list[dict] = [{"role": "user", "content": "go"}]
    for i, result in enumerate([{"balance": 10, "items": []}, {"balance": 7, "items": ["pen"]}, "done"]):
        messages.append({"role": "assistant", "tool_calls": [tool_call(f"k{i}", "buy", {"i": i})]})
        messages.append({"role": "tool", "tool_call_id": f"k{i}",
                         "content": result if isinstance(result, str) else orjson.dumps(result).decode()})
    write_jsonl(tmp_path / "a.jsonl", [{"id": "shop", "messages": messages}])
    workspace.ingest([tmp_path / "a.jsonl"], "d")
    root = str(workspace.root)
    assert main(["traces", "diff", "shop#0", "shop#1", "--dataset", "d", "--workspace", root, "--json"]) == 0
    out = orjson.loads(capsys.readouterr().out)
    assert out["changes"] == [{"path": "/balance", "kind": "changed", "before": 10, "after": 7},
                              {"path": "/items/0", "kind": "added", "before": None, "after": "pen"}]
    assert main(["traces", "diff", "shop#0", "shop#1", "--dataset", "d", "--workspace", root]) == 0
    assert "changed  /balance: 10 -> 7" in capsys.readouterr().out
    assert main(["traces", "diff", "shop#1", "shop#2", "--dataset", "d", "--workspace", root]) == 1
    assert "shop#2" in capsys.readouterr().err


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=4),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=3), children, max_size=4),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_a_document_against_itself_has_no_changes(value: object) -> None:
    assert json_changes(value, value) == []


@settings(max_examples=300, deadline=None)
@given(json_values, json_values)
def test_applying_the_changes_rebuilds_the_after(before: object, after: object) -> None:
    changes = json_changes(before, after)
    assert apply_changes(before, changes) == after
    assert all(change.kind in ("added", "removed", "changed") for change in changes)


def test_observation_diff_names_the_one_field_that_differs_in_a_long_result() -> None:
    before = {"order_id": "#W1", "items": [{"name": f"item {i}", "price": 10 * i} for i in range(30)],
              "refund": {"amount": 120.5, "method": "card"}}
    after = {**before, "refund": {"amount": 98.0, "method": "card"}}
    diff = observation_diff(orjson.dumps(before).decode(), orjson.dumps(after).decode())
    assert diff.kind == "json"
    assert diff.changes == (JsonChange("/refund/amount", "changed", 120.5, 98.0),)
    assert diff.summary() == "1 changed"
    assert not diff.same


def test_observation_diff_falls_back_to_words_for_text() -> None:
    diff = observation_diff("You see a red apple.", "You see a green apple.")
    assert diff.kind == "text"
    assert [(s.op, s.text.strip()) for s in diff.segments if s.op != "equal"] == [("delete", "red"),
                                                                                   ("insert", "green")]
    assert diff.summary() == "1 word added, 1 word removed"
    assert observation_diff("same words", "same words").same
    assert observation_diff('{"a": 1}', "not json").kind == "text"
    assert observation_diff(None, "new").segments[0].op == "insert"
