"""The MCP server in-process (the SDK's in-memory transport): what a client is told when the server's own files fail.

A session that cannot be saved is a tool error the client can read, naming the failure but never where the
server keeps its files (`ServedWorldbook.redact`).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from mcp import Client

from worldsmith.serve import CLOSE_SESSION_TOOL, ServeConfig, ServedWorldbook, build_mcp_server
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
