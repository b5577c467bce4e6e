"""The Traces page's import can redact: what it stores holds pseudonyms, the report counts them, and the mapping
is kept apart from the dataset (or not at all)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from worldsmith.workspace import Workspace

CHAT = {"id": "c1", "messages": [
    {"role": "system", "content": "You help Dr. Quentin Marsh (quentin.marsh@harbor-labs.io)."},
    {"role": "user", "content": "Hi, this is Quentin. My card 4539 1488 0343 6467, phone (415) 867-5309."},
    {"role": "assistant", "tool_calls": [{"id": "k0", "type": "function", "function": {
        "name": "find_user", "arguments": json.dumps({"email": "quentin.marsh@harbor-labs.io"})}}]},
    {"role": "tool", "tool_call_id": "k0", "content": json.dumps(
        {"user_id": "u1", "name": "Quentin Marsh", "email": "quentin.marsh@harbor-labs.io"})}]}
PLANTED = ("quentin.marsh@harbor-labs.io", "4539 1488 0343 6467", "867-5309", "Quentin", "Marsh")


@pytest.mark.parametrize("choice", ["yes, keep the mapping", "yes, keep no mapping"])
def test_an_import_with_redaction_stores_no_planted_value(empty_root: Path, choice: str) -> None:
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=120).run()
    at.radio(key="tr_import_redact").set_value(choice).run()
    at.file_uploader[0].set_value(("chat.jsonl", (json.dumps(CHAT) + "\n").encode(), "application/json"))
    at.run()
    at.button(key="tr_import_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    summary = at.session_state["tr_last_report"]
    assert summary["committed"] and summary["redaction"]["kinds"]["card"]["values"] == 1
    assert any("redacted:" in str(element.value) for element in at.success)
    stored = "".join(e.model_dump_json() for e in Workspace(empty_root).dataset("uploads").iter_episodes())
    assert [value for value in PLANTED if value in stored] == []
    mapping = empty_root / "redaction" / "uploads.json"
    assert mapping.exists() == (choice == "yes, keep the mapping")
    assert summary["redaction"]["mapping"] == (str(mapping) if mapping.exists() else None)
