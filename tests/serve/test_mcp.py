"""`worldsmith serve BOOK --mcp` as a real subprocess, driven by the official MCP SDK client.

Over stdio: the tool list is the book's; a recorded BFCL episode's calls, replayed through the
client, get exactly the observations the harness gives in-process on the recorded actions, and
land in one saved session; an unknown tool is a JSON-RPC error, a bad argument a tool result with
isError. Over streamable HTTP: named sessions, unnamed 2026-07-28 calls and handshake-era
connections stay apart (a name never reaches another MCP session's episode, nor another token's),
results name no server path, ended MCP sessions are closed; without a token a 2026-07-28 name is
refused and only handles continue; `close_session` ends a session at once, and a closed or expired
handle fails with why instead of starting over; rebinding Host and foreign Origin are refused on
loopback and on 0.0.0.0, where a token is enforced and idle sessions expire.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError
from serve_support import server_env, serving

from ports import free_port
from worldsmith.serve import CLOSE_SESSION_TOOL, SESSION_META_KEY, book_tools
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


def test_stdio_lists_tools_replays_an_episode_and_reports_errors(served_workspace: tuple[Path, list[Episode]]) -> None:
    workspace, episodes = served_workspace
    episode = episodes[0]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "worldsmith", "serve", "bfcl", "--mcp"], env=server_env(workspace)
    )

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
    assert [(t.name, t.input_schema) for t in listed][:-1] == [(t.name, t.input_schema) for t in book_tools(book)]
    assert listed[-1].name == CLOSE_SESSION_TOOL
    expected = _in_process(workspace, episode)
    assert [r.content[0].text for r in results] == expected
    assert not any(r.is_error for r in results)
    assert [r.structured_content["turn"] for r in results] == list(range(len(episode.turns)))
    assert bad.is_error and "argument 'lines': 'twenty' is not of type 'integer'" in bad.content[0].text
    assert unknown.code == -32602 and "unknown tool 'rm_rf'" in unknown.message
    assert after.structured_content["turn"] == len(episode.turns)  # errors did not break or advance the session
    assert str(workspace) not in json.dumps([r.structured_content for r in [*results, after]])  # no server paths
    directory = workspace / "sessions" / after.structured_content["session"]
    with Session.open(directory) as session:  # saved and audited: the bad calls are not in it
        assert len(session) == len(episode.turns) + 1
        assert [t.prediction.observation for t in session.turns()][:-1] == expected
        assert [t.action.name for t in session.turns()][:-1] == [t.action.name for t in episode.turns]
        assert session.meta["book_ref"].startswith("bfcl@v0001")


def _probe(url: str, **headers: str) -> int:
    """The status of a bare initialize POST to `url` carrying `headers` (what a web page could send)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    return httpx.post(
        url, json=body, headers={"Accept": "application/json, text/event-stream", **headers}, timeout=30
    ).status_code


def _turns(seen: dict[str, list[dict[str, Any]]], key: str) -> list[int]:
    return [details["turn"] for details in seen[key]]


def _client(url: str, token: str | None = None, mode: str = "auto") -> Client:
    """An SDK client of `url` (2026-07-28 unless `mode` is "legacy"), sending `token` as its bearer token."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
    return Client(transport, mode=mode, read_timeout_seconds=120)  # type: ignore[arg-type]


def test_streamable_http_keeps_sessions_apart(
    served_workspace: tuple[Path, list[Episode]], tmp_path: Path
) -> None:
    workspace, episodes = served_workspace
    port = free_port()
    calls = [(t.action.name, t.action.arguments) for t in episodes[0].turns[:2]]
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("# one per client\nalpha-token\nbeta-token\n")

    async def play(client: Client, key: str, seen: dict[str, list[dict[str, Any]]], name: str | None = None) -> None:
        for tool, arguments in calls:
            result = await client.call_tool(tool, arguments, meta={SESSION_META_KEY: name} if name else None)
            assert not result.is_error, result
            seen.setdefault(key, []).append(dict(result.structured_content))

    async def drive(url: str) -> dict[str, list[dict[str, Any]]]:
        seen: dict[str, list[dict[str, Any]]] = {}
        async with _client(url, "alpha-token") as alpha, _client(url, "beta-token") as beta:  # 2026-07-28
            for name in ("agent-a", "agent-b"):
                await play(alpha, name, seen, name)
            await play(beta, "beta-agent-a", seen, "agent-a")  # the same name, another token: another episode
            for index in range(2):  # unnamed: a new session each time, continued by the handle it returns
                first = await alpha.call_tool(*calls[0])
                again = await alpha.call_tool(*calls[1], meta={SESSION_META_KEY: first.structured_content["handle"]})
                seen[f"unnamed-{index}"] = [dict(first.structured_content), dict(again.structured_content)]
        for index in range(2):  # handshake-era clients: one session per Mcp-Session-Id, names scoped to it
            async with _client(url, "alpha-token", mode="legacy") as client:
                await play(client, f"legacy-{index}", seen)
                await play(client, f"legacy-{index}-agent-a", seen, "agent-a")  # not the 2026 client's agent-a
                await play(client, f"legacy-{index}-same", seen, "same")  # both name it: still two sessions
        return seen

    ready = f"http://127.0.0.1:{port}/info"
    auth = {"Authorization": "Bearer beta-token"}
    with serving(
        workspace, "bfcl", "--mcp", "--transport", "http", "--port", str(port), "--token-file", str(tokens),
        ready_url=ready,
    ) as process:
        seen = asyncio.run(drive(f"http://127.0.0.1:{port}/mcp"))
        info = httpx.get(ready, headers=auth, timeout=30).json()
        probes = {
            "rebound": _probe(f"http://127.0.0.1:{port}/mcp", Host="evil.example", **auth),
            "rebound-info": httpx.get(ready, headers={"Host": "evil.example", **auth}, timeout=30).status_code,
            "foreign-origin": _probe(f"http://127.0.0.1:{port}/mcp", Origin="https://evil.example", **auth),
            "local-origin": _probe(f"http://127.0.0.1:{port}/mcp", Origin=f"http://localhost:{port}", **auth),
            "no-token": _probe(f"http://127.0.0.1:{port}/mcp"),
        }
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert all(_turns(seen, key) == [0, 1] for key in seen), seen
    sessions = [{details["session"] for details in turns} for turns in seen.values()]
    assert all(len(names) == 1 for names in sessions)
    assert len(set.union(*sessions)) == len(seen) == 11  # eleven clients or names, eleven saved sessions
    assert seen["agent-a"][0]["session"] != seen["beta-agent-a"][0]["session"]
    for details in (details for turns in seen.values() for details in turns):
        assert "/" not in details["session"] and str(workspace) not in json.dumps(details)  # no server paths
        assert (workspace / "sessions" / details["session"]).is_dir()
    handles = [seen[f"unnamed-{index}"][0]["handle"] for index in range(2)]
    assert len(set(handles)) == 2 and all(len(handle) >= 20 for handle in handles)
    # the legacy sessions ended with their MCP sessions (the client's DELETE); the 2026 ones wait to expire
    assert info["sessions"] | {"idle": 0} == {"open": 5, "idle": 0, "opened": 11, "expired": 0, "closed": 6}
    assert probes == {"rebound": 421, "rebound-info": 421, "foreign-origin": 403, "local-origin": 200, "no-token": 401}
    assert not any(token in (out + err) for token in (b"alpha-token", b"beta-token"))  # never logged or echoed


def _texts(result: Any) -> str:
    """Everything a tool result shows a client, as one JSON text."""
    return json.dumps(result.model_dump(mode="json", by_alias=True))


def test_sessions_end_when_closed_or_idle_and_say_so(
    served_workspace: tuple[Path, list[Episode]],
) -> None:
    """Without a token: names refused, handles continue; `close_session` frees a session at once; a closed or
    expired handle is an error naming why, never a fresh episode; no result or error names a server path."""
    workspace, episodes = served_workspace
    port = free_port()
    call = (episodes[0].turns[0].action.name, episodes[0].turns[0].action.arguments)
    book = WorldbookStore(workspace / "worldbooks").load("bfcl")
    examples = {item.action: item.arguments for item in reversed(book.evidence) if isinstance(item.arguments, dict)}

    async def drive(url: str) -> dict[str, Any]:
        got: dict[str, Any] = {}
        async with _client(url) as client:
            got["named"] = await client.call_tool(*call, meta={SESSION_META_KEY: "agent-a"})
            first = await client.call_tool(*call)
            handle = first.structured_content["handle"]
            got["continued"] = await client.call_tool(*call, meta={SESSION_META_KEY: handle})
            got["close"] = await client.call_tool(CLOSE_SESSION_TOOL, {"session": handle})
            got["after-close"] = await client.call_tool(*call, meta={SESSION_META_KEY: handle})
            got["close-again"] = await client.call_tool(CLOSE_SESSION_TOOL, {"session": handle})
            got["close-unsaid"] = await client.call_tool(CLOSE_SESSION_TOOL, {})
            got["close-bad"] = await client.call_tool(CLOSE_SESSION_TOOL, {"session": handle, "force": True})
            idle = await client.call_tool(*call)  # left alone until it expires
            got["idle-handle"] = idle.structured_content["handle"]
            got["every-tool"] = [  # each of the book's tools, with arguments the evidence shows, then with none
                await client.call_tool(tool.name, arguments)
                for tool in (await client.list_tools()).tools
                if tool.name != CLOSE_SESSION_TOOL
                for arguments in (examples.get(tool.name, {}), {"no_such_argument": 1})
            ]
            with pytest.raises(MCPError) as unknown:
                await client.call_tool("rm_rf", {"path": str(workspace)})
            got["unknown"] = unknown.value
        async with _client(url, mode="legacy") as legacy:  # a handshake-era client: its default session
            await legacy.call_tool(*call)
            got["legacy-close-theirs"] = await legacy.call_tool(CLOSE_SESSION_TOOL, {"session": got["idle-handle"]})
            got["legacy-close"] = await legacy.call_tool(CLOSE_SESSION_TOOL, {})
            got["legacy-after-close"] = await legacy.call_tool(*call)
        await asyncio.sleep(9)  # past the idle timeout (6 s): the sweeper expires the abandoned handle
        async with _client(url) as client:
            got["after-expiry"] = await client.call_tool(*call, meta={SESSION_META_KEY: got["idle-handle"]})
            got["close-expired"] = await client.call_tool(CLOSE_SESSION_TOOL, {"session": got["idle-handle"]})
        got["info"] = httpx.get(f"{url[:-4]}/info", timeout=30).json()["sessions"]
        return got

    with serving(
        workspace, "bfcl", "--mcp", "--transport", "http", "--port", str(port), "--idle-timeout", "6",
        ready_url=f"http://127.0.0.1:{port}/info",
    ):
        got = asyncio.run(drive(f"http://127.0.0.1:{port}/mcp"))

    def error(key: str) -> str:
        assert got[key].is_error, got[key]
        return str(got[key].content[0].text)

    assert "no open session 'agent-a' for you here: this server has no token" in error("named")
    assert got["continued"].structured_content["turn"] == 1
    closed = got["close"].structured_content
    assert not got["close"].is_error and closed["turns"] == 2 and closed["session"]
    assert got["close"].content[0].text.startswith("closed session") and "after 2 turns" in got["close"].content[0].text
    handle = closed["closed"]
    assert error("after-close") == error("close-again")
    assert f"session {handle!r} was closed already; start a new one" in error("after-close")
    assert "say which session to close" in error("close-unsaid") and "takes only 'session'" in error("close-bad")
    assert "no open session" in error("legacy-close-theirs")  # another client's handle: not this one's to close
    assert not got["legacy-close"].is_error and got["legacy-close"].structured_content["turns"] == 1
    assert "was closed already" in error("legacy-after-close")  # its default session is not silently reopened
    idle = got["idle-handle"]
    assert error("after-expiry") == error("close-expired")
    assert f"session {idle!r} expired after 6 s idle; start a new one" in error("after-expiry")
    every = got["every-tool"]
    played = sum(not result.is_error for result in every[::2])  # each a new session, left to expire
    assert played > 0 and all(result.is_error for result in every[1::2])
    # opened: the closed handle, the idle one, the legacy default, the tools' ones; closed: the two closed by the tool
    assert got["info"] | {"idle": 0} == {"open": 0, "idle": 0, "opened": 3 + played, "expired": 1 + played, "closed": 2}
    assert "unknown tool 'rm_rf'" in got["unknown"].message
    shown = json.dumps([_texts(v) if hasattr(v, "model_dump") else str(v) for v in got.values() if v is not every])
    shown += "".join(_texts(result) for result in every)
    for path in {str(workspace), str(workspace.resolve())}:
        assert path not in shown  # no result or error text names the server's workspace


def test_on_all_interfaces_the_allow_lists_hold_the_token_is_required_and_idle_sessions_expire(
    served_workspace: tuple[Path, list[Episode]],
) -> None:
    workspace, episodes = served_workspace
    port = free_port()
    url, info_url = f"http://127.0.0.1:{port}/mcp", f"http://127.0.0.1:{port}/info"
    tool, arguments = episodes[0].turns[0].action.name, episodes[0].turns[0].action.arguments
    auth = {"Authorization": "Bearer s3cret"}

    async def call(headers: dict[str, str]) -> dict[str, Any]:
        transport = streamable_http_client(url, http_client=create_mcp_http_client(headers=headers))
        async with Client(transport, read_timeout_seconds=120) as client:
            return dict((await client.call_tool(tool, arguments)).structured_content)

    with serving(
        workspace,
        "bfcl",
        "--mcp",
        "--transport",
        "http",
        "--host",
        "0.0.0.0",
        "--port",
        str(port),
        "--token",
        "s3cret",
        "--idle-timeout",
        "1",
        "--allow-host",
        "sim.lab",
        ready_url=info_url,
    ):
        probes = {
            "rebound": _probe(url, Host="evil.example", **auth),
            "foreign-origin": _probe(url, Origin="https://evil.example", **auth),
            "no-token": _probe(url),
            "wrong-token": _probe(url, Authorization="Bearer nope"),
            "info-no-token": httpx.get(info_url, timeout=30).status_code,
            "allowed-host": _probe(url, Host=f"sim.lab:{port}", **auth),
        }
        played = asyncio.run(call(auth))
        opened = httpx.get(info_url, headers=auth, timeout=30).json()["sessions"]
        time.sleep(2.5)  # past the idle timeout: the sweeper closes the session
        expired = httpx.get(info_url, headers=auth, timeout=30).json()["sessions"]
    assert probes == {
        "rebound": 421,
        "foreign-origin": 403,
        "no-token": 401,
        "wrong-token": 401,
        "info-no-token": 401,
        "allowed-host": 200,
    }
    assert played["turn"] == 0 and (opened["open"], opened["opened"]) == (1, 1)
    assert (expired["open"], expired["expired"]) == (0, 1)
