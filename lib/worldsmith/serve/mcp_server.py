"""The worldbook as an MCP server (the official `mcp` SDK's low-level `Server`).

Its tools are the book's actions with their learned argument schemas (`serve.tools`). Each client
connection gets its own `ServedSession` the first time it calls a tool; a call is predicted by the
world model, committed, and answered with the observation as text (and, as structured content,
the turn, outcome, route, done and reward). Errors follow the protocol: an unknown tool is a
JSON-RPC error (-32602, invalid params); arguments that do not fit the schema are a tool result
with `isError` and the reason, which the calling model can read and correct.

A session's SQLite connection belongs to one thread, so each client has a one-thread executor
that opens, plays and closes its session; the event loop never blocks on a world model.
"""

from __future__ import annotations

import asyncio
import weakref
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from worldsmith import __version__
from worldsmith.serve.simulator import ServedSession, ServedWorldbook
from worldsmith.serve.tools import ToolArgumentError, UnknownToolError, action_for_call
from worldsmith.sim.session import SessionTurn

__all__ = ["SESSION_META_KEY", "build_mcp_server", "run_mcp_http", "run_mcp_stdio", "turn_result"]

SESSION_META_KEY = "worldsmith/session"


class _Client:
    """One connection's session and the thread it lives on."""

    def __init__(self, served: ServedWorldbook, label: str) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worldsmith-mcp")
        self.session: ServedSession | None = None
        self.served = served
        self.label = label

    async def run(self, function: Any, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)

    def play(self, action: Any) -> SessionTurn:
        if self.session is None:
            self.session = self.served.open_session(self.label)
        return self.session.play(action)

    def close(self) -> None:
        def shut() -> None:
            if self.session is not None:
                self.session.close()
        try:
            self.executor.submit(shut)
        except RuntimeError:  # interpreter exit: every turn is committed already, SQLite needs no goodbye
            return
        self.executor.shutdown(wait=True)


def turn_result(turn: SessionTurn, session_dir: str) -> types.CallToolResult:
    """A committed turn as the tool's result: the observation text, details as structured content."""
    prediction = turn.prediction
    details = {"observation": prediction.observation, "turn": turn.index, "outcome": prediction.outcome,
               "route": prediction.audit.route, "done": prediction.done, "reward": prediction.reward,
               "session": session_dir}
    return types.CallToolResult(content=[types.TextContent(type="text", text=prediction.observation)],
                                structured_content=details)


def build_mcp_server(served: ServedWorldbook, *, label: str = "mcp") -> Server[Any]:
    """An MCP server over `served`: `tools/list` gives the book's actions, `tools/call` plays them.

    Which session a call belongs to: the `_meta` key `worldsmith/session` when the client names one
    (needed on stateless 2026-07-28 HTTP, where every request is its own connection), else the HTTP
    `Mcp-Session-Id` (handshake-era clients), else the stream the request came on: on stdio the process's
    one client; on 2026-07-28 HTTP all unnamed requests share one stream, hence one session, so several
    agents on one HTTP server should each name theirs.
    """
    by_name: dict[str, _Client] = {}
    by_connection: weakref.WeakKeyDictionary[Any, _Client] = weakref.WeakKeyDictionary()
    tools = [types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema)
             for tool in served.tools]

    def client_for(ctx: Any) -> _Client:
        named = (ctx.meta or {}).get(SESSION_META_KEY)
        connection = getattr(ctx.session, "_connection", ctx.session)  # mcp 2.3: the per-client Connection
        key = f"named:{named}" if isinstance(named, str) and named else None
        if key is None and getattr(connection, "session_id", None):
            key = f"mcp-session:{connection.session_id}"
        if key is not None:
            if key not in by_name:
                by_name[key] = _Client(served, label)
            return by_name[key]
        # A 2026-07-28 request is its own `Connection`; the stream it came on (`outbound`) is the client.
        channel = getattr(connection, "outbound", None) or connection
        client = by_connection.get(channel)
        if client is None:
            client = by_connection[channel] = _Client(served, label)
            weakref.finalize(channel, client.close)
        return client

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        try:
            action = action_for_call(served.book, params.name, params.arguments)
        except UnknownToolError as error:
            raise MCPError(INVALID_PARAMS, str(error)) from None
        except ToolArgumentError as error:
            return types.CallToolResult(content=[types.TextContent(type="text", text=str(error))], is_error=True)
        client = client_for(ctx)
        turn = await client.run(client.play, action)
        assert client.session is not None
        return turn_result(turn, str(client.session.session.directory))

    return Server(f"worldsmith:{served.book_ref}", version=__version__,
                  instructions=f"A simulator of {served.book.env_id or served.book.name} learned from recorded "
                               f"interactions (worldbook {served.book_ref}); each tool is one of its actions.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def _serve_stdio(server: Server[Any]) -> None:
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_mcp_stdio(served: ServedWorldbook) -> None:
    """Serve one client on standard input/output until it disconnects."""
    asyncio.run(_serve_stdio(build_mcp_server(served, label="mcp-stdio")))


def run_mcp_http(served: ServedWorldbook, *, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve clients over streamable HTTP at `http://HOST:PORT/mcp` until interrupted."""
    import uvicorn

    app = build_mcp_server(served, label="mcp-http").streamable_http_app(host=host)
    uvicorn.run(app, host=host, port=port, log_level="warning")
