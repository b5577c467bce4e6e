"""`worldsmith serve BOOK --mcp` as a real subprocess, driven by the official MCP SDK client.

Over stdio: the tool list is the book's; a recorded BFCL episode's calls, replayed through the
client, get exactly the observations the harness gives in-process on the recorded actions, and
land in one saved session; an unknown tool is a JSON-RPC error, a bad argument a tool result with
isError. Over streamable HTTP: named sessions (and handshake-era connections) stay apart.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError
from serve_support import server_env, serving

from ports import free_port
from worldsmith.serve import SESSION_META_KEY, book_tools
from worldsmith.sim import Harness, Session
from worldsmith.sim.base import episode_prefix
from worldsmith.traces import Episode
from worldsmith.worldbook import WorldbookStore

pytestmark = pytest.mark.slow  # starts MCP servers as subprocesses


def _in_process(workspace: Path, episode: Episode) -> list[str]:
    """The harness's observations for the episode's recorded actions, in this process."""
    harness = Harness(WorldbookStore(workspace / "worldbooks").load("bfcl"))
    harness.start(episode_prefix(episode.initial_observation.text if episode.initial_observation else ""), None)
    observations = []
    for turn in episode.turns:
        observations.append(harness.predict(turn.action).observation)
        harness.commit()
    return observations


def test_stdio_lists_tools_replays_an_episode_and_reports_errors(
        served_workspace: tuple[Path, list[Episode]]) -> None:
    workspace, episodes = served_workspace
    episode = episodes[0]
    params = StdioServerParameters(command=sys.executable, args=["-m", "worldsmith", "serve", "bfcl", "--mcp"],
                                   env=server_env(workspace))

    async def drive() -> tuple[list, list, list, object, MCPError]:
        async with Client(params, read_timeout_seconds=120) as client:
            listed = (await client.list_tools()).tools
            results = [await client.call_tool(turn.action.name, turn.action.arguments) for turn in episode.turns]
            bad = await client.call_tool("tail", {"file_name": "log.txt", "lines": "twenty"})
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("rm_rf", {"path": "/"})
            after = await client.call_tool(episode.turns[0].action.name, episode.turns[0].action.arguments)
            return listed, results, [bad], after, unknown.value

    listed, results, (bad,), after, unknown = asyncio.run(drive())
    book = WorldbookStore(workspace / "worldbooks").load("bfcl")
    assert [(t.name, t.input_schema) for t in listed] == [(t.name, t.input_schema) for t in book_tools(book)]
    expected = _in_process(workspace, episode)
    assert [r.content[0].text for r in results] == expected
    assert not any(r.is_error for r in results)
    assert [r.structured_content["turn"] for r in results] == list(range(len(episode.turns)))
    assert bad.is_error and "argument 'lines': 'twenty' is not of type 'integer'" in bad.content[0].text
    assert unknown.code == -32602 and "unknown tool 'rm_rf'" in unknown.message
    assert after.structured_content["turn"] == len(episode.turns)  # errors did not break or advance the session
    directory = Path(after.structured_content["session"])
    assert directory.parent == workspace / "sessions"
    with Session.open(directory) as session:  # saved and audited: the bad calls are not in it
        assert len(session) == len(episode.turns) + 1
        assert [t.prediction.observation for t in session.turns()][:-1] == expected
        assert [t.action.name for t in session.turns()][:-1] == [t.action.name for t in episode.turns]
        assert session.meta["book_ref"].startswith("bfcl@v0001")


def test_streamable_http_keeps_sessions_apart(served_workspace: tuple[Path, list[Episode]]) -> None:
    workspace, episodes = served_workspace
    port = free_port()
    calls = [(t.action.name, t.action.arguments) for t in episodes[0].turns[:2]]

    async def drive(url: str) -> dict[str, list[tuple[int, str]]]:
        seen: dict[str, list[tuple[int, str]]] = {}
        async with Client(url, read_timeout_seconds=120) as client:
            for name in ("agent-a", "agent-b"):
                for tool, arguments in calls:
                    result = await client.call_tool(tool, arguments, meta={SESSION_META_KEY: name})
                    seen.setdefault(name, []).append((result.structured_content["turn"],
                                                      result.structured_content["session"]))
        for index in range(2):  # handshake-era clients: one session per Mcp-Session-Id
            async with Client(url, mode="legacy", read_timeout_seconds=120) as client:
                for tool, arguments in calls:
                    result = await client.call_tool(tool, arguments)
                    seen.setdefault(f"legacy-{index}", []).append((result.structured_content["turn"],
                                                                   result.structured_content["session"]))
        return seen

    with serving(workspace, "bfcl", "--mcp", "--transport", "http", "--port", str(port),
                 ready_url=f"http://127.0.0.1:{port}/mcp"):
        seen = asyncio.run(drive(f"http://127.0.0.1:{port}/mcp"))
    assert all([turn for turn, _ in turns] == [0, 1] for turns in seen.values()), seen
    sessions = [{path for _, path in turns} for turns in seen.values()]
    assert all(len(paths) == 1 for paths in sessions)
    assert len(set.union(*sessions)) == 4  # four clients, four saved sessions
