"""The worldbook as an MCP server (the official `mcp` SDK's low-level `Server`).

Its tools are the book's actions with their learned argument schemas (`serve.tool_schemas`). A call is
predicted by the world model, committed to its session, and answered with the observation as text
(and, as structured content, the turn, outcome, route, done, reward, the session's saved name
relative to the server's sessions folder, and the handle that continues it). Errors follow the
protocol: an unknown tool is a JSON-RPC error (-32602, invalid params); arguments that do not fit
the schema are a tool result with `isError` and the reason, which the calling model can read and
correct.

Which session a call plays in (`SessionRegistry`): sessions belong to an owner, and a `_meta`
name (`worldsmith/session`) only picks among the owner's own, so one client can never read or
advance another's episode. The owner is the MCP session (`Mcp-Session-Id`, handshake-era HTTP)
or the connection (stdio); an unnamed call plays in that owner's default session. A 2026-07-28
HTTP request has no MCP session: its owner is the bearer token it carried (`--token`, repeatable,
or `--token-file`: each token its own namespace of names, so two clients with different tokens
both naming "agent-1" play two episodes), and an unnamed call opens a new session whose
unguessable handle the result carries. On a server without tokens nothing tells such clients
apart, so a name is refused there: only a handle the server gave out continues a session.

Sessions end, their thread, SQLite connection and memory freed, when their client calls the
`close_session` tool, when their MCP session ends (DELETE, or the SDK's idle timeout), after
`idle_timeout` seconds unused, and when the server stops. A closed or expired session's handle
then fails with why ("session 'h' expired after 600 s idle; start a new one"), never silently
starting a new episode under it (`serve.lifetimes`). Each SQLite connection belongs to one thread,
so each session has a one-thread executor and the event loop never blocks on a world model. Every
text a client gets passes `ServedWorldbook.redact`: no absolute server paths. Over HTTP the app
sits behind `serve.guard` and the SDK's own DNS-rebinding protection is configured with the same
allow-lists, whatever the bind address.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import secrets
import sqlite3
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from worldsmith import __version__
from worldsmith.serve.commands import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS
from worldsmith.serve.guard import GuardMiddleware, ServeSecurity, bind_warning, credential_of
from worldsmith.serve.lifetimes import EndedSessions, Ending, SessionEndedError
from worldsmith.serve.memory_release import trim_memory
from worldsmith.serve.simulator import ServedSession, ServedWorldbook
from worldsmith.serve.tool_schemas import ToolArgumentError, UnknownToolError, action_for_call, close_tool
from worldsmith.sim.session import SessionTurn

__all__ = [
    "SESSION_META_KEY",
    "SessionRegistry",
    "UnknownSessionError",
    "build_mcp_http_app",
    "build_mcp_server",
    "guarded_http_app",
    "owner_of",
    "run_mcp_http",
    "run_mcp_stdio",
    "serve_stdio",
    "turn_result",
]

SESSION_META_KEY = "worldsmith/session"


class UnknownSessionError(LookupError):
    """A call named a session its client has no open one of (never opened here, or another client's)."""


class _Owner(NamedTuple):
    """Whose sessions a request may use: `key` names them; `stateless` (a 2026-07-28 HTTP request): an unnamed
    call opens a new session with a fresh handle; `names`: whether a name the client picks may open one."""

    key: str
    stateless: bool = False
    names: bool = True


class _Client:
    """One session and the thread it lives on."""

    def __init__(
        self, served: ServedWorldbook, label: str, owner: str, handle: str | None, now: float, stateless: bool
    ) -> None:
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worldsmith-mcp")
        self.session: ServedSession | None = None
        self.served = served
        self.label = label
        self.owner = owner
        self.handle = handle
        self.stateless = stateless
        self.last_used = now
        self.in_flight = 0
        self.turns = 0
        self.saved_as = ""  # the session's folder name under the server's sessions folder (never an absolute path)
        self.ended: SessionEndedError | None = None  # set (under the registry's lock) when it is closed or expires

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        try:
            return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)
        except RuntimeError:
            if self.ended is not None:  # closed between acquire and submit: its thread is gone
                raise self.ended from None
            raise

    def play(self, action: Any) -> SessionTurn:
        if self.ended is not None:  # closed while this call waited its turn: never reopen it
            raise self.ended
        if self.session is None:
            self.session = self.served.open_session(self.label)
            self.saved_as = self.session.session.directory.name
        turn = self.session.play(action)
        self.turns += 1
        return turn

    def close(self) -> None:
        """Close the session on its own thread, then end that thread (blocks until both are done)."""

        def shut() -> None:
            if self.session is not None:
                self.session.close()
                self.session = None

        try:
            self.executor.submit(shut)
        except RuntimeError:  # closed already, or interpreter exit: every turn is committed, SQLite needs no goodbye
            return
        self.executor.shutdown(wait=True)


def _shown(key: str) -> str:
    return key or "(this connection's default)"


class SessionRegistry:
    """The sessions of one MCP server, keyed by (owner, name); at most `max_sessions`, closed when idle.

    `acquire`/`release` bracket each call (a session in use is never expired); `close` ends one session
    (its client's `close_session`); `close_owner` ends an owner's sessions (its MCP session ended); `sweep`
    expires idle ones; `counts` is what `/info` shows. A closed or expired session's key is remembered
    (`serve.lifetimes`), so a call that names it again fails with why instead of starting over.
    """

    def __init__(
        self,
        served: ServedWorldbook,
        label: str,
        *,
        idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
        max_sessions: int | None = DEFAULT_MAX_SESSIONS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.served = served
        self.label = label
        self.idle_timeout = idle_timeout
        self.max_sessions = max_sessions
        self._clock = clock
        self._clients: dict[tuple[str, str], _Client] = {}
        self._ended = EndedSessions()
        self._lock = threading.Lock()
        self.opened = self.expired = self.closed = 0

    def __len__(self) -> int:
        return len(self._clients)

    def _ended_error(self, key: tuple[str, str], ending: Ending, stateless: bool) -> SessionEndedError:
        restart = (
            "start a new one (a call without a session name opens one)"
            if stateless
            else "start a new one (another session name, or a new connection)"
        )
        return SessionEndedError(ending.reason("session", _shown(key[1]), restart), ending)

    def acquire(self, owner: str, name: str | None, *, stateless: bool = False, names: bool = True) -> _Client:
        """The owner's open session called `name` (made on first use), marked in use. On a `stateless` owner
        `name` None opens a new session with a fresh unguessable handle; with `names` False a name that is not
        an open session's handle is refused. `SessionEndedError` for a closed or expired one,
        `UnknownSessionError` for a refused name, MCPError at `max_sessions`."""
        handle = name if name is not None or not stateless else secrets.token_urlsafe(16)
        key = (owner, handle or "")
        with self._lock:
            client = self._clients.get(key)
            if client is None:
                ending = self._ended.get(key)
                if ending is not None:
                    raise self._ended_error(key, ending, stateless)
                if not names and name is not None:
                    raise UnknownSessionError(
                        f"no open session {name!r} for you here: this server has no token, so on the 2026-07-28 "
                        "protocol a session is continued only by the handle an unnamed call returned (names need "
                        "the server started with --token or --token-file: each token names its own sessions)"
                    )
                if self.max_sessions is not None and len(self._clients) >= self.max_sessions:
                    raise MCPError(
                        INTERNAL_ERROR,
                        f"{self.max_sessions} sessions are open on this server; "
                        "end yours (close_session, or DELETE the MCP session) or wait for idle ones to expire",
                    )
                client = self._clients[key] = _Client(
                    self.served, self.label, owner, handle, self._clock(), stateless
                )
                self.opened += 1
            client.in_flight += 1
            return client

    def release(self, client: _Client) -> None:
        with self._lock:
            client.in_flight -= 1
            client.last_used = self._clock()

    def close(self, owner: str, name: str, *, stateless: bool = False) -> _Client:
        """Close the owner's open session `name` now, its thread, SQLite files and memory freed (blocking: call
        it off the event loop); the closed client (its handle, saved folder and turns). `SessionEndedError` when
        it was closed or expired already, `UnknownSessionError` when the owner has no such session."""
        key = (owner, name)
        with self._lock:
            client = self._clients.pop(key, None)
            if client is None:
                ending = self._ended.get(key)
                if ending is not None:
                    raise self._ended_error(key, ending, stateless)
                raise UnknownSessionError(
                    f"no open session {_shown(name)!r} for you to close (sessions belong to the client, or the "
                    "token, that opened them)"
                )
            ending = Ending(how="closed")
            client.ended = self._ended_error(key, ending, stateless)
            self._ended.record(key, ending)
            self.closed += 1
        client.close()
        trim_memory()
        return client

    def _take(self, keep: Callable[[tuple[str, str], _Client], bool]) -> list[_Client]:
        """Take out the sessions `keep` refuses, marked ended (a call already under way cannot reopen them)."""
        ending = Ending(how="closed")
        with self._lock:
            gone = [key for key, client in self._clients.items() if not keep(key, client)]
            for key in gone:
                self._clients[key].ended = self._ended_error(key, ending, self._clients[key].stateless)
            return [self._clients.pop(key) for key in gone]

    def close_owner(self, owner: str) -> int:
        """Close every session of `owner` (blocking: call it off the event loop); how many. The owner is gone
        for good (its MCP session or connection ended), so nothing is remembered of them."""
        gone = self._take(lambda key, _: key[0] != owner)
        for client in gone:
            client.close()
        with self._lock:
            self.closed += len(gone)
        if gone:
            trim_memory()
        return len(gone)

    def sweep(self) -> int:
        """Close the sessions unused for longer than `idle_timeout` (blocking); how many."""
        if self.idle_timeout is None:
            return 0
        deadline = self._clock() - self.idle_timeout
        ending = Ending(how="expired", idle_s=self.idle_timeout)
        with self._lock:
            stale = [key for key, client in self._clients.items() if client.in_flight == 0 and client.last_used < deadline]
            gone = [self._clients.pop(key) for key in stale]
            for key, client in zip(stale, gone, strict=True):
                client.ended = self._ended_error(key, ending, client.stateless)
                self._ended.record(key, ending)
            self.expired += len(gone)
        for client in gone:
            client.close()
        if gone:
            trim_memory(min_interval=0.0)
        return len(gone)

    def close_all(self) -> None:
        gone = self._take(lambda *_: False)
        for client in gone:
            client.close()
        with self._lock:
            self.closed += len(gone)

    def counts(self) -> dict[str, int]:
        """Open sessions, the idle ones among them (no call for a minute, or half the timeout), and the totals
        opened, expired and closed (by their client, their MCP session's end, or shutdown) since the server
        started."""
        idle_after = min(60.0, self.idle_timeout / 2) if self.idle_timeout else 60.0
        now = self._clock()
        with self._lock:
            idle = sum(1 for c in self._clients.values() if c.in_flight == 0 and now - c.last_used >= idle_after)
            return {
                "open": len(self._clients),
                "idle": idle,
                "opened": self.opened,
                "expired": self.expired,
                "closed": self.closed,
            }


def turn_result(turn: SessionTurn, session: str, handle: str | None = None) -> types.CallToolResult:
    """A committed turn as the tool's result: the observation text, details as structured content.

    `session` is the saved session's name (its folder under the server's sessions folder); `handle`, when
    the session has one, is what the client sends as `_meta` `worldsmith/session` to continue it."""
    prediction = turn.prediction
    details = {
        "observation": prediction.observation,
        "turn": turn.index,
        "outcome": prediction.outcome,
        "route": prediction.audit.route,
        "done": prediction.done,
        "reward": prediction.reward,
        "session": session,
        "handle": handle,
    }
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=prediction.observation)], structured_content=details
    )


def owner_of(ctx: Any, on_end: Callable[[str], Any]) -> _Owner:
    """Whose sessions this request may use (module docstring); on first sight of an owner that ends (an MCP session
    or a connection), arranges `on_end(owner key)` to run, off the event loop, when it does."""
    connection = getattr(ctx.session, "_connection", ctx.session)  # mcp 2.3: the per-client Connection
    session_id = getattr(connection, "session_id", None)
    if session_id:
        owner = f"mcp-session:{session_id}"
    elif ctx.request is not None:  # HTTP without an MCP session: a 2026-07-28 single exchange, owned by its token
        credential = credential_of(ctx.request.scope)
        return _Owner(f"http:{credential}" if credential else "http", stateless=True, names=credential is not None)
    elif getattr(connection, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS:
        # stdio, 2026-07-28: a connection per request on one stream (its `outbound`); closed with the server
        return _Owner(f"stdio:{id(connection.outbound)}")
    else:
        owner = f"stdio:{id(connection)}"
    state = getattr(connection, "state", None)
    if state is not None and not state.get("worldsmith_cleanup"):
        state["worldsmith_cleanup"] = True

        async def cleanup() -> None:
            await anyio.to_thread.run_sync(on_end, owner)

        connection.exit_stack.push_async_callback(cleanup)
    return _Owner(owner)


def _tool_error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def build_mcp_server(
    served: ServedWorldbook, *, label: str = "mcp", registry: SessionRegistry | None = None
) -> Server[Any]:
    """An MCP server over `served`: `tools/list` gives the book's actions and `close_session`, `tools/call`
    plays them.

    `registry` holds the sessions (default: one with the default idle timeout and cap); while the
    server runs, idle sessions are expired in the background, and all are closed when it stops. Every
    text a client gets passes `served.redact` (no server paths).
    """
    sessions = registry if registry is not None else SessionRegistry(served, label)
    closer = close_tool(served.book)
    tools = [
        types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema)
        for tool in [*served.tools, closer]
    ]

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        sweeper = asyncio.create_task(_sweep_forever(sessions)) if sessions.idle_timeout else None
        try:
            yield {}
        finally:
            if sweeper is not None:
                sweeper.cancel()
            await anyio.to_thread.run_sync(sessions.close_all)

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def close_session(owner: _Owner, arguments: dict[str, Any] | None, named: str | None) -> types.CallToolResult:
        arguments = dict(arguments or {})
        chosen = arguments.pop("session", None)
        if arguments or (chosen is not None and (not isinstance(chosen, str) or not chosen)):
            return _tool_error(f"tool {closer.name!r}: takes only 'session', a non-empty string (a handle or name)")
        target = chosen or named or ("" if not owner.stateless else None)
        if target is None:
            return _tool_error(
                f"tool {closer.name!r}: say which session to close: its handle (from a result) as 'session', "
                f"or as _meta {SESSION_META_KEY!r}"
            )
        try:
            client = await anyio.to_thread.run_sync(
                functools.partial(sessions.close, owner.key, target, stateless=owner.stateless)
            )
        except LookupError as error:
            return _tool_error(served.redact(str(error)))
        details = {"closed": _shown(target), "session": client.saved_as, "turns": client.turns}
        text = f"closed session {_shown(target)!r} after {client.turns} turn{'s' * (client.turns != 1)}"
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=details)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        given = (ctx.meta or {}).get(SESSION_META_KEY)
        named = given if isinstance(given, str) and given else None
        if params.name == closer.name:
            return await close_session(owner_of(ctx, sessions.close_owner), params.arguments, named)
        try:
            action = action_for_call(served.book, params.name, params.arguments)
        except UnknownToolError as error:
            raise MCPError(INVALID_PARAMS, served.redact(str(error))) from None
        except ToolArgumentError as error:
            return _tool_error(served.redact(str(error)))
        owner = owner_of(ctx, sessions.close_owner)
        try:
            client = sessions.acquire(owner.key, named, stateless=owner.stateless, names=owner.names)
        except LookupError as error:  # closed, expired, or a name this client may not use
            return _tool_error(served.redact(str(error)))
        try:
            turn = await client.run(client.play, action)
            return turn_result(turn, client.saved_as, client.handle)
        except LookupError as error:  # closed while this call waited
            return _tool_error(served.redact(str(error)))
        except (ValueError, OSError, sqlite3.Error) as error:  # the world model or the session's files failed
            return _tool_error(served.redact(f"the simulator could not answer: {type(error).__name__}: {error}"))
        finally:
            sessions.release(client)

    return Server(
        f"worldsmith:{served.book_ref}",
        version=__version__,
        instructions=f"A simulator of {served.book.env_id or served.book.name} learned from recorded "
        f"interactions (worldbook {served.book_ref}); each tool is one of its actions, except "
        f"{closer.name!r}, which ends a session.",
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def _sweep_forever(sessions: SessionRegistry) -> None:
    """Expire idle sessions a few times per timeout (at most every 30 s), off the event loop."""
    interval = min(30.0, max(0.05, (sessions.idle_timeout or 30.0) / 4))
    while True:
        await asyncio.sleep(interval)
        await anyio.to_thread.run_sync(sessions.sweep)


async def serve_stdio(server: Server[Any]) -> None:
    """Run `server` on standard input/output until its client disconnects."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_mcp_stdio(served: ServedWorldbook) -> None:
    """Serve one client on standard input/output until it disconnects (its sessions live until then)."""
    registry = SessionRegistry(served, "mcp-stdio", idle_timeout=None, max_sessions=None)
    asyncio.run(serve_stdio(build_mcp_server(served, label="mcp-stdio", registry=registry)))


def build_mcp_http_app(
    served: ServedWorldbook,
    *,
    host: str = "127.0.0.1",
    security: ServeSecurity | None = None,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
) -> GuardMiddleware:
    """The streamable-HTTP app (`/mcp`, and `GET /info`: session counts) behind `serve.guard`.

    The SDK's transport security is set explicitly from `security` (it would switch itself off on a
    non-loopback `host`); its MCP sessions share `idle_timeout` and `max_sessions` with ours.
    """
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    security = security or ServeSecurity(max_response_bytes=None)
    registry = SessionRegistry(served, "mcp-http", idle_timeout=idle_timeout, max_sessions=max_sessions)
    server = build_mcp_server(served, label="mcp-http", registry=registry)

    async def info(request: Request) -> JSONResponse:
        return JSONResponse(
            {
                "book": served.book_ref,
                "tools": len(served.tools),
                "sessions": registry.counts(),
                "idle_timeout_s": idle_timeout,
                "max_sessions": max_sessions,
            }
        )

    return guarded_http_app(server, host=host, security=security, idle_timeout=idle_timeout,
                            max_sessions=max_sessions, routes=[Route("/info", info, methods=["GET"])])


def guarded_http_app(
    server: Server[Any],
    *,
    host: str,
    security: ServeSecurity,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
    routes: list[Any] | None = None,
) -> GuardMiddleware:
    """`server`'s streamable-HTTP app (`/mcp`, and `routes`) behind `serve.guard`, the SDK's DNS-rebinding
    protection set from the same allow-lists whatever the bind address."""
    from mcp.server.transport_security import TransportSecuritySettings

    transport = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=security.host_patterns(host),
        allowed_origins=security.origin_patterns(),
    )
    app = server.streamable_http_app(
        host=host,
        transport_security=transport,
        max_request_body_size=security.max_request_bytes,
        session_idle_timeout=idle_timeout,
        max_sessions=max_sessions,
        custom_starlette_routes=routes or [],
    )
    return GuardMiddleware(app, security, bind=host, limit_responses=False)


def run_mcp_http(
    served: ServedWorldbook,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    security: ServeSecurity | None = None,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
) -> None:
    """Serve clients over streamable HTTP at `http://HOST:PORT/mcp` until interrupted (a warning on
    stderr when `host` is reachable from other machines and no token is required)."""
    import uvicorn

    security = security or ServeSecurity(max_response_bytes=None)
    warning = bind_warning(host, security)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    app = build_mcp_http_app(served, host=host, security=security, idle_timeout=idle_timeout, max_sessions=max_sessions)
    uvicorn.run(app, host=host, port=port, log_level="warning")
