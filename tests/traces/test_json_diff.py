"""JSON observations diffed as JSON: fields added, removed and changed, by JSON pointer; and `traces diff`."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from helpers import tool_call, write_jsonl
from worldsmith import Workspace
from worldsmith.cli.main import main
from worldsmith.traces import JsonChange, json_changes, json_text_changes


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
