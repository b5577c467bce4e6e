"""The Traces page imports in a separate, memory-limited process and removes the uploads afterwards (issue 32)."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from worldsmith.workspace import Workspace
from worldsmith.workspace.isolated_ingest import IsolatedIngestError


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    at.file_uploader[0].set_value((name, data, "application/json"))
    at.run()
    at.button(key="tr_import_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_upload_is_imported_in_a_child_process_and_then_removed(
    empty_root: Path, openai_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import worldsmith.workspace.isolated_ingest as isolated

    children: list[int] = []
    original = isolated.subprocess.Popen

    def popen(*args: object, **kwargs: object) -> object:
        child = original(*args, **kwargs)  # type: ignore[call-overload]
        children.append(child.pid)
        return child

    monkeypatch.setattr(isolated.subprocess, "Popen", popen)
    at = upload(AppTest.from_file(str(TRACES_PAGE), default_timeout=120).run(), "chat.jsonl", openai_file.read_bytes())
    summary = at.session_state["tr_last_report"]
    assert summary["committed"] and summary["episodes"] == 1 and len(children) == 1
    assert Workspace(empty_root).dataset("uploads").stats()["episodes"] == 1
    assert not Path(summary["files"][0]["path"]).exists()
    assert [p for p in (empty_root / "uploads").rglob("*") if p.is_file()] == []


def test_a_dead_import_process_is_an_error_on_the_page_and_the_upload_is_removed(
    empty_root: Path, openai_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def dies(*args: object, **kwargs: object) -> dict[str, object]:
        raise IsolatedIngestError("the import's process was killed by SIGKILL <b>x</b>; nothing was committed")

    monkeypatch.setattr("workbench.traces.importer.ingest_isolated", dies)
    at = upload(AppTest.from_file(str(TRACES_PAGE), default_timeout=120).run(), "chat.jsonl", openai_file.read_bytes())
    assert any("killed by SIGKILL" in str(error.value) for error in at.error)
    assert [p for p in (empty_root / "uploads").rglob("*") if p.is_file()] == []
