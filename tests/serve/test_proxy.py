"""`worldsmith proxy` in front of the real mcp-server-sqlite, driven by a scripted agent through the MCP SDK client.

Record: each session is stored call for call (the answers the client got, the upstream's tool schemas, one
environment id), tools/list is the upstream's; a proxy killed with SIGKILL mid-session loses no answered call and
the next start stores the partial episode, marked. Replay: a book built from recorded sessions answers with no
upstream, as the harness does in-process. Hybrid: the writes reach the real database (answering them from the
book would have left it behind), reads the book is sure of are answered, and --stats counts both.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp_agents import clerk_calls, shop_database, sqlite_clerk
from serve_support import server_env

from mcp_testbeds import sqlite_server
from ports import free_port
from worldsmith.serve.state_changes import state_changes
from worldsmith.sim import Harness
from worldsmith.sim.base import episode_prefix
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # starts MCP servers as subprocesses

READS = ["--read-only", "list_tables", "--read-only", "describe_table", "--read-only", "read_query"]


def _proxy(workspace: Path, *args: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "worldsmith", "proxy", *args],
                                 env=server_env(workspace))


def _play(params: StdioServerParameters, seeds: list[int]) -> tuple[list[Any], list[list[tuple[str, dict, str]]]]:
    """Each seed one session (one proxy process, as an agent framework starts it); the tool list and what each got."""

    async def drive() -> tuple[list[Any], list[list[tuple[str, dict, str]]]]:
        sessions = []
        tools: list[Any] = []
        for seed in seeds:
            async with Client(params, read_timeout_seconds=120) as client:
                tools = (await client.list_tools()).tools
                sessions.append(await sqlite_clerk(client, seed))
        return tools, sessions

    return asyncio.run(drive())


def _direct_tools(db: Path) -> list[Any]:
    command = sqlite_server(db)

    async def listing() -> list[Any]:
        async with Client(StdioServerParameters(command=command[0], args=command[1:]), read_timeout_seconds=60) as c:
            return (await c.list_tools()).tools

    return asyncio.run(listing())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[list[tuple[str, dict, str]]]]:
    """A workspace whose dataset "shop" holds four recorded clerk sessions (each on a fresh database)."""
    root = tmp_path_factory.mktemp("proxy-ws")
    sessions = []
    for seed in range(4):
        db = shop_database(root / f"shop-{seed}.db")
        params = _proxy(root, "--mode", "record", "--dataset", "shop", "--", *sqlite_server(db))
        tools, played = _play(params, [seed])
        sessions += played
    assert [tool.name for tool in tools] == [tool.name for tool in _direct_tools(root / "shop-0.db")]
    return root, sessions


def test_record_stores_every_session_call_for_call(recorded: tuple[Path, list[list[tuple[str, dict, str]]]]) -> None:
    root, sessions = recorded
    dataset = Workspace(root).dataset("shop")
    episodes = sorted(dataset.iter_episodes(), key=lambda e: e.metadata["proxy"]["started"])
    assert len(episodes) == 4
    for episode, played in zip(episodes, sessions, strict=True):
        assert [(t.action.name, t.action.arguments, t.observation.text) for t in episode.turns] == \
            [(name, arguments, text) for name, arguments, text in played]
        assert episode.metadata["partial"] is False
        assert {"run", "session", "upstream"} <= set(episode.metadata["proxy"])
        assert all(turn.info["latency_s"] >= 0 and turn.info["error"] is False for turn in episode.turns)
    assert len({episode.env_id for episode in episodes}) == 1  # the declared tool set names the environment
    schemas = {tool["name"]: tool["inputSchema"] for tool in episodes[0].metadata["tools"]}
    assert schemas["read_query"]["required"] == ["query"]
    assert "'affected_rows': 1" in sessions[0][[n for n, _, _ in sessions[0]].index("write_query")][2]


def _wait_for(url: str, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"proxy exited with {process.returncode}: {process.stderr.read().decode()[-3000:]}")
        try:
            httpx.get(url, timeout=2.0)
            return
        except httpx.HTTPError:
            if time.monotonic() > deadline:
                raise AssertionError(f"proxy did not answer {url} in {timeout}s") from None
            time.sleep(0.2)


def _start_http_proxy(root: Path, port: int, db: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [sys.executable, "-m", "worldsmith", "proxy", "--mode", "record", "--dataset", "killed", "--transport", "http",
         "--port", str(port), "--", *sqlite_server(db)],
        env=server_env(root), stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    _wait_for(f"http://127.0.0.1:{port}/mcp", process)
    return process


def test_sigkill_mid_session_keeps_every_answered_call(tmp_path: Path) -> None:
    db = shop_database(tmp_path / "shop.db")
    port = free_port()
    process = _start_http_proxy(tmp_path, port, db)
    calls = clerk_calls(7)[:4]

    async def drive() -> list[str]:
        """Four answered calls, then the proxy (and its upstream) killed while the session is still open."""
        answers = []
        with contextlib.suppress(Exception):  # the client's goodbye finds no server
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=30) as client:
                for name, arguments in calls:
                    answers.append("\n".join(p.text for p in (await client.call_tool(name, arguments)).content))
                os.killpg(process.pid, signal.SIGKILL)
                await asyncio.to_thread(process.wait)
        return answers

    try:
        answers = asyncio.run(drive())
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    assert len(answers) == len(calls)
    assert not (tmp_path / "datasets" / "killed" / "manifest.json").exists()  # the session never ended
    assert len(list((tmp_path / "runs" / "proxy" / "killed" / "journal").glob("*.jsonl"))) == 1
    restarted = _start_http_proxy(tmp_path, free_port(), db)  # its start stores what the killed one left
    try:
        episodes = list(Workspace(tmp_path).dataset("killed").iter_episodes())
    finally:
        os.killpg(restarted.pid, signal.SIGTERM)
        restarted.wait(timeout=30)
    assert len(episodes) == 1
    episode = episodes[0]
    assert episode.metadata["partial"] is True
    assert [(t.action.name, t.action.arguments, t.observation.text) for t in episode.turns] == \
        [(name, arguments, text) for (name, arguments), text in zip(calls, answers, strict=True)]
    assert not list((tmp_path / "runs" / "proxy" / "killed" / "journal").glob("*.jsonl"))


@pytest.fixture(scope="module")
def shop_book(recorded: tuple[Path, list[list[tuple[str, dict, str]]]]) -> Path:
    """The recorded workspace with worldbook "shop" built from its sessions."""
    root, _ = recorded
    episodes = list(Workspace(root).dataset("shop").iter_episodes())
    WorldbookStore(root / "worldbooks").save(build_simulator_book(episodes, name="shop").book)
    return root


def test_replay_answers_from_the_book_without_an_upstream(shop_book: Path) -> None:
    root = shop_book
    book = WorldbookStore(root / "worldbooks").load("shop")
    calls = clerk_calls(0)
    harness = Harness(book)
    harness.start(episode_prefix(""), None)
    expected = []
    for name, arguments in calls:
        expected.append(harness.predict({"name": name, "arguments": arguments}).observation)
        harness.commit()

    async def drive() -> tuple[list[str], list[str]]:
        async with Client(_proxy(root, "--mode", "replay", "--book", "shop"), read_timeout_seconds=120) as client:
            names = [tool.name for tool in (await client.list_tools()).tools]
            results = [await client.call_tool(name, arguments) for name, arguments in calls]
            return names, [result.content[0].text for result in results]

    names, answers = asyncio.run(drive())
    assert set(names) >= {"list_tables", "read_query", "write_query"}
    assert answers == expected
    recorded_answers = [text for _, _, text in recorded_session(root, 0)]
    assert answers[0] == recorded_answers[0]  # list_tables: what the real server said


def recorded_session(root: Path, seed: int) -> list[tuple[str, dict, str]]:
    calls = clerk_calls(seed)
    for episode in Workspace(root).dataset("shop").iter_episodes():
        if [(t.action.name, t.action.arguments) for t in episode.turns] == calls:
            return [(t.action.name, t.action.arguments, t.observation.text) for t in episode.turns]
    raise AssertionError(f"no recorded session of seed {seed}")


def test_hybrid_forwards_every_write_and_answers_sure_reads(shop_book: Path, tmp_path: Path) -> None:
    root = shop_book
    book = WorldbookStore(root / "worldbooks").load("shop")
    db = shop_database(tmp_path / "live.db")
    stats = tmp_path / "stats.jsonl"
    seeds = [10, 11]
    params = _proxy(root, "--mode", "hybrid", "--book", "shop", "--dataset", "hybrid", "--stats", str(stats), *READS,
                    "--", *sqlite_server(db))
    _, sessions = _play(params, seeds)
    lines = [json.loads(line) for line in stats.read_text().splitlines()]
    assert len(lines) == len(seeds)
    writes = [sum(name in ("write_query", "append_insight") for name, _ in clerk_calls(seed)) for seed in seeds]
    for line, seed, wrote in zip(lines, seeds, writes, strict=True):
        assert set(line) == {"session", "calls", "forwarded", "answered"}
        assert line["calls"] == len(clerk_calls(seed)) == line["forwarded"] + line["answered"]
        assert line["forwarded"] >= wrote
    assert sum(line["answered"] for line in lines) >= 1  # the book answered what it was sure of
    # every write reached the real database: answered by the book, the inserts and updates would be missing
    with sqlite3.connect(db) as connection:
        stock = dict(connection.execute("SELECT name, qty FROM items").fetchall())
    for seed in seeds:
        inserted = clerk_calls(seed)[[n for n, _ in clerk_calls(seed)].index("write_query")][1]["query"]
        name = inserted.split("'")[1]
        assert name in stock
    tools = [{"name": name} for name in ("list_tables", "describe_table", "read_query", "write_query", "create_table",
                                         "append_insight")]
    changes = state_changes(book, tools, ["list_tables", "describe_table", "read_query"])
    assert changes.may_change("write_query") and changes.may_change("append_insight")
    assert changes.may_change("create_table")  # never seen by the book: assumed to write
    recorded = list(Workspace(root).dataset("hybrid").iter_episodes())  # what was forwarded, recorded
    assert sorted(len(e.turns) for e in recorded) == sorted(line["forwarded"] for line in lines)
