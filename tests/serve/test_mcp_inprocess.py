"""The MCP server in-process: what a client is told when the server's own files fail, and the session registry's
bookkeeping on a fake clock (unit tests of logic).

A session that cannot be saved is a tool error the client can read, naming the failure but never where the
server keeps its files (`ServedWorldbook.redact`). A session closed while a call waits is not reopened by it;
an expired one says after how long.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mcp import Client

from worldsmith.serve import (
    CLOSE_SESSION_TOOL,
    ServeConfig,
    ServedWorldbook,
    SessionEndedError,
    SessionRegistry,
    UnknownSessionError,
    build_mcp_server,
)
from worldsmith.traces import Episode


def test_a_failing_session_folder_is_a_tool_error_without_server_paths(
    served_workspace: tuple[Path, list[Episode]], tmp_path: Path
) -> None:
    workspace, episodes = served_workspace
    blocked = tmp_path / "server-private" / "sessions"
    blocked.parent.mkdir()
    blocked.write_text("a file where the sessions folder should be")
    served = ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace), sessions=str(blocked)))
    action = episodes[0].turns[0].action

    async def drive() -> tuple[str, str]:
        async with Client(build_mcp_server(served), read_timeout_seconds=60) as client:
            failed = await client.call_tool(action.name, action.arguments)
            assert failed.is_error
            closed = await client.call_tool(CLOSE_SESSION_TOOL, {})  # the session never opened a thing
            return str(failed.content[0].text), str(closed.content[0].text)

    failed, closed = asyncio.run(drive())
    assert failed.startswith("the simulator could not answer: ") and "<sessions>" in failed
    assert "server-private" not in failed and str(tmp_path) not in failed and str(workspace) not in failed
    assert "closed session" in closed  # the failed call's session was made (its thread) and is freed by the tool


def test_redact_replaces_the_server_folders_spelled_either_way(
    served_workspace: tuple[Path, list[Episode]],
) -> None:
    workspace, _ = served_workspace
    served = ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace)))
    text = f"cannot write {workspace / 'sessions' / 'x'}; nor {workspace.resolve() / 'worldbooks'}"
    assert served.redact(text) == "cannot write <sessions>/x; nor <workspace>/worldbooks"


def test_the_registry_never_reopens_an_ended_session(served_workspace: tuple[Path, list[Episode]]) -> None:
    workspace, episodes = served_workspace
    served = ServedWorldbook(ServeConfig(book="bfcl", workspace=str(workspace)))
    action = episodes[0].turns[0].action
    now = [0.0]
    registry = SessionRegistry(served, "unit", idle_timeout=10.0, clock=lambda: now[0])
    waiting = registry.acquire("http:token-1", "agent-a", stateless=True)  # a call under way...
    assert registry.close("http:token-1", "agent-a", stateless=True) is waiting  # ...when its session is closed
    with pytest.raises(SessionEndedError, match="session 'agent-a' was closed already; start a new one"):
        waiting.play(action)
    registry.release(waiting)
    assert waiting.session is None and waiting.executor._shutdown  # nothing reopened, its thread gone
    with pytest.raises(SessionEndedError, match="was closed already"):
        registry.acquire("http:token-1", "agent-a", stateless=True)
    other = registry.acquire("http:token-2", "agent-a", stateless=True)  # the same name, another token
    registry.release(other)
    with pytest.raises(UnknownSessionError, match="this server has no token"):
        registry.acquire("http", "agent-a", stateless=True, names=False)
    now[0] = 10.5
    assert registry.sweep() == 1
    with pytest.raises(SessionEndedError, match="session 'agent-a' expired after 10 s idle") as ended:
        registry.acquire("http:token-2", "agent-a", stateless=True)
    assert ended.value.ending.how == "expired"
    with pytest.raises(UnknownSessionError, match="no open session 'nope'"):
        registry.close("http:token-2", "nope")
    assert registry.counts() == {"open": 0, "idle": 0, "opened": 2, "expired": 1, "closed": 1}
