"""Fixtures for the workbench tests: sample trace folders, populated workspaces, page paths."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser_support import CHROMIUM, CHROMIUM_ARGS, WAIT_MS
from workbench_support import FORMATS, REPO

# (shared file, fallback in data_samples/)
SAMPLE_SOURCES = [
    (FORMATS / "role_prefixed" / "ledger_trace.txt", REPO / "data_samples" / "ledger.role_prefixed.txt"),
    (FORMATS / "agentworldbench" / "synthetic_terminal.jsonl", REPO / "data_samples" / "terminal.agentworldbench.jsonl"),
]


def _sample_file(shared: Path, fallback: Path) -> Path:
    for candidate in (shared, fallback):
        if candidate.exists():
            return candidate
    pytest.skip(f"sample trace missing: {shared} (and {fallback})")


def openai_conversation(conv_id: str, reward: float, n_calls: int = 1, task_id: int = 3) -> dict[str, Any]:
    """An OpenAI-format conversation with `n_calls` tool calls (one turn each)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"hi from {conv_id}"}]
    for i in range(n_calls):
        messages.append({
            "role": "assistant", "content": None,
            "tool_calls": [{"id": f"call{i}", "type": "function",
                            "function": {"name": "get_user", "arguments": json.dumps({"user_id": f"u{i}"})}}],
        })
        messages.append({"role": "tool", "tool_call_id": f"call{i}",
                         "content": json.dumps({"name": f"user number {i}", "index": i})})
    return {"id": conv_id, "task_id": task_id, "reward": reward, "messages": messages}


OPENAI_LINE = (
    '{"id": "c1", "task_id": 3, "reward": 1.0, "messages": [{"role":"user","content":"hi"},'
    '{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":'
    '{"name":"get_user","arguments":"{\\"user_id\\": \\"u1\\"}"}}]},'
    '{"role":"tool","tool_call_id":"a","content":"{\\"name\\": \\"Mia\\"}"}]}\n'
)


@pytest.fixture(scope="session")
def samples_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the two shared sample traces (role-prefixed ledger, AgentWorldBench terminal)."""
    folder = tmp_path_factory.mktemp("samples")
    for shared, fallback in SAMPLE_SOURCES:
        source = _sample_file(shared, fallback)
        shutil.copy(source, folder / shared.name)  # the shared name, so episode ids are the same either way
    return folder


@pytest.fixture(scope="session")
def openai_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("openai") / "chat.openai.jsonl"
    path.write_text(OPENAI_LINE, encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def chat_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three OpenAI conversations: c-win (reward 1), c-lose (reward 0), c-long (45 turns, reward 0)."""
    path = tmp_path_factory.mktemp("chat") / "chat.jsonl"
    rows = [openai_conversation("c-win", 1.0), openai_conversation("c-lose", 0.0, n_calls=2),
            openai_conversation("c-long", 0.0, n_calls=45, task_id=7)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def many_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """30 one-turn OpenAI conversations m00..m29 (more than one page of 25)."""
    path = tmp_path_factory.mktemp("many") / "many.jsonl"
    rows = [openai_conversation(f"m{i:02d}", float(i % 2)) for i in range(30)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="session")
def populated_root(
    tmp_path_factory: pytest.TempPathFactory, samples_folder: Path, chat_file: Path, many_file: Path
) -> Path:
    """Datasets `samples` (2 episodes), `chat` (3) and `many` (30). Read-only for tests."""
    from worldsmith.workspace import Workspace

    root = tmp_path_factory.mktemp("ws-populated")
    workspace = Workspace(root)
    assert workspace.ingest([samples_folder], "samples").committed
    assert workspace.ingest([chat_file], "chat").committed
    assert workspace.ingest([many_file], "many").committed
    return root


@pytest.fixture
def populated(monkeypatch: pytest.MonkeyPatch, populated_root: Path) -> Path:
    """Point the workbench at the populated workspace (and disable the sample import)."""
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(populated_root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", "")
    return populated_root


@pytest.fixture
def empty_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """A fresh, empty workspace (writable), with the sample import disabled."""
    root = tmp_path / "ws"
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", "")
    return root


@pytest.fixture(scope="module")
def browser(server: dict) -> Iterator[object]:
    """Headless Chromium for the module's `server` (each browser test module defines its own)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser, server: dict) -> Iterator[object]:
    """A fresh browser context (a new Streamlit session) and its page."""
    from playwright.sync_api import expect

    expect.set_options(timeout=WAIT_MS)  # the first render of a page loads its widgets' code lazily
    context = browser.new_context(viewport={"width": 1400, "height": 1200})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    try:
        yield page
    finally:
        context.close()
