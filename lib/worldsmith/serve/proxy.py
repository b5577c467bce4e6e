"""`worldsmith proxy`: an MCP server in front of another one, recording it, standing in for it, or both.

    proxy = McpProxy(ProxyConfig(mode="record", dataset="sqlite", upstream_command=["mcp-server-sqlite", ...]))
    run_proxy_stdio(proxy)          # or run_proxy_http(proxy, port=8767)

To its client the proxy is the upstream (`tools/list` forwarded, schemas and annotations kept). Each client
session (a stdio connection, an HTTP MCP session) is one session of the proxy:

- `record`: every `tools/call` goes to the upstream, and its answer back, as it came; the call and the answer
  are journaled before the answer is returned (`serve.proxy_journal`: synced per call, one episode per session);
- `replay`: no upstream: the book's simulator answers (`serve.mcp_server` over `ServedWorldbook`, one simulation
  session per client session);
- `hybrid`: the book answers a call where it is sure (`sim.uncertainty.assess`: an answer whose expected error,
  the route table's held-out record, is at most `max_error`, and that is not a fallback: the closest evidence
  adapted to new arguments is a guess, whatever the record of the action's other answers) and the tool only
  reads (`serve.state_changes`);
  everything else goes to the upstream, is recorded, and is taught to the session's simulator (`observe`), so
  the simulator's state follows the upstream's and the two never diverge.

A stdio upstream is started with the proxy's own environment (it stands in for the client that would have
started it).

`stats` (a file) gets one JSON line per ended session: {"session", "calls", "forwarded", "answered"}. Other MCP
methods (resources, prompts) are not proxied.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import secrets
import shlex
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

import anyio
import mcp_types as types
import orjson
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from pydantic import BaseModel, ConfigDict, Field, model_validator

from worldsmith import __version__
from worldsmith.serve.commands import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS
from worldsmith.serve.guard import ServeSecurity, bind_warning
from worldsmith.serve.mcp_server import guarded_http_app, owner_of, serve_stdio
from worldsmith.serve.proxy_journal import (
    CallRecord,
    Redactor,
    SessionJournal,
    SessionOrigin,
    journal_dir,
    no_redaction,
    recover_journals,
)
from worldsmith.serve.simulator import ServeConfig, ServedSession, ServedWorldbook
from worldsmith.serve.state_changes import StateChanges, state_changes
from worldsmith.serve.tool_schemas import ToolArgumentError, UnknownToolError, action_for_call
from worldsmith.sim.base import Audit, Prediction
from worldsmith.sim.session import TurnRecord
from worldsmith.sim.uncertainty import assess
from worldsmith.traces.model import Action
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import Workspace

__all__ = ["DEFAULT_MAX_ERROR", "McpProxy", "ProxyConfig", "build_proxy_server", "run_proxy_http", "run_proxy_stdio"]

ProxyMode = Literal["record", "replay", "hybrid"]
DEFAULT_MAX_ERROR = 0.1
"""Hybrid: the most expected error (`Uncertainty.expected_error`) an answer from the book may carry."""


class ProxyConfig(BaseModel):
    """What the proxy stands in front of, and what it does with the calls."""

    model_config = ConfigDict(extra="forbid")

    mode: ProxyMode = "record"
    workspace: str | None = Field(default=None, description="Workspace folder (default: $WORLDSMITH_WORKSPACE).")
    dataset: str | None = Field(default=None, description="record / hybrid: the dataset sessions are recorded into.")
    book: str | None = Field(default=None, description="replay / hybrid: the worldbook that answers.")
    version: str | None = None
    method: str | None = Field(default=None, description="World model (default: the harness).")
    model: str | None = Field(default=None, description="LLM spec for world models that use one.")
    upstream_command: list[str] = Field(default_factory=list, description="The upstream, started on stdio.")
    upstream_url: str | None = Field(default=None, description="The upstream, over streamable HTTP.")
    stats: str | None = Field(default=None, description="A file that gets one JSON line per ended session.")
    read_only: list[str] = Field(default_factory=list, description="hybrid: tools you know only read.")
    max_error: float = Field(default=DEFAULT_MAX_ERROR, ge=0.0, le=1.0)
    upstream_timeout_s: float = Field(default=120.0, gt=0)

    @model_validator(mode="after")
    def _fits_mode(self) -> ProxyConfig:
        upstream = bool(self.upstream_command) + bool(self.upstream_url)
        if self.mode == "replay":
            if upstream:
                raise ValueError("replay has no upstream: leave out the command after -- and --upstream-url")
        elif upstream != 1:
            raise ValueError(f"{self.mode} needs one upstream: a command after -- (stdio) or --upstream-url")
        if self.mode in ("record", "hybrid") and not self.dataset:
            raise ValueError(f"{self.mode} records into a dataset: give --dataset")
        if self.mode in ("replay", "hybrid") and not self.book:
            raise ValueError(f"{self.mode} answers from a worldbook: give --book")
        return self

    @property
    def upstream(self) -> str:
        return self.upstream_url or shlex.join(self.upstream_command)

    def serve_config(self) -> ServeConfig:
        assert self.book is not None
        extra = {"method": self.method} if self.method else {}
        return ServeConfig(book=self.book, version=self.version, workspace=self.workspace, model=self.model, **extra)


class _Session:
    """One client session: its journal, its simulator session (hybrid) on its own thread, its counts."""

    def __init__(self, proxy: McpProxy, key: str) -> None:
        self.key = key
        self.id = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(4)}"
        self.calls = self.forwarded = self.answered = 0
        self.journal = SessionJournal(
            journal_dir(proxy.workspace, proxy.config.dataset or ""),
            SessionOrigin(session=self.id, run=proxy.run_id, upstream=proxy.config.upstream, mode=proxy.config.mode,
                          tools=proxy.tool_dicts, started=time.time()),
            redact=proxy.redact,
        )
        self.lock = threading.Lock()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worldsmith-proxy")
        self.sim: ServedSession | None = None

    async def run(self, function: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.executor, function, *args)


class McpProxy:
    """The proxy's state: its config, the upstream's tools, the book (replay / hybrid) and the open sessions."""

    def __init__(self, config: ProxyConfig, *, redact: Redactor = no_redaction) -> None:
        self.config = config
        self.redact = redact
        self.run_id = f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"
        self.workspace = Workspace(config.workspace)
        self.served = ServedWorldbook(config.serve_config()) if config.book else None
        if config.mode == "hybrid" and self.served is not None:
            model = self.served.world_model()
            if not callable(getattr(model, "observe", None)):
                raise BadInputError(f"world model {self.served.config.method!r} cannot be taught the upstream's "
                                    "answers (it has no observe); hybrid needs one that can, such as the harness")
        self.tools: list[types.Tool] = []
        self.tool_dicts: list[dict[str, Any]] = []
        self.changes: StateChanges | None = None
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self._client: Client | None = None
        self.recovered = 0

    # ------------------------------------------------------------------ upstream
    @contextlib.asynccontextmanager
    async def connected(self) -> AsyncIterator[McpProxy]:
        """The upstream connected and its tools listed; journals a killed proxy left stored as partial episodes;
        on leaving, every open session ended."""
        config = self.config
        if config.dataset:
            self.recovered = len(await anyio.to_thread.run_sync(recover_journals, self.workspace, config.dataset))
        target: Any = config.upstream_url or StdioServerParameters(
            command=config.upstream_command[0], args=config.upstream_command[1:], env=dict(os.environ))
        try:
            async with Client(target, read_timeout_seconds=config.upstream_timeout_s) as client:
                self._client = client
                self.tools = await _all_tools(client)
                self.tool_dicts = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in self.tools]
                if self.served is not None:
                    self.changes = state_changes(self.served.book, self.tool_dicts, config.read_only)
                yield self
        finally:
            self._client = None
            await anyio.to_thread.run_sync(self.end_all)

    async def _forward(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        assert self._client is not None
        return await self._client.call_tool(name, arguments)

    # ------------------------------------------------------------------ sessions
    def session(self, key: str) -> _Session:
        with self._lock:
            found = self._sessions.get(key)
            if found is None:
                found = self._sessions[key] = _Session(self, key)
            return found

    def end(self, key: str) -> None:
        """End a client's session: its episode stored, its simulator session closed, its stats line written."""
        with self._lock:
            session = self._sessions.pop(key, None)
        if session is None:
            return
        if session.sim is not None:
            sim = session.sim
            session.executor.submit(sim.close).result()
        session.executor.shutdown(wait=True)
        with session.lock:
            session.journal.finish(self.workspace, self.config.dataset or "")
        if self.config.stats:
            _append_line(Path(self.config.stats), {"session": session.id, "calls": session.calls,
                                                   "forwarded": session.forwarded, "answered": session.answered})

    def end_all(self) -> None:
        with self._lock:
            keys = list(self._sessions)
        for key in keys:
            self.end(key)

    # ------------------------------------------------------------------ calls
    async def call(self, key: str, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        session = self._sessions.get(key) or await anyio.to_thread.run_sync(self.session, key)  # a new one opens a journal
        session.calls += 1
        if self.config.mode == "hybrid":
            answered = await session.run(self._book_answer, session, name, arguments)
            if answered is not None:
                session.answered += 1
                return types.CallToolResult(content=[types.TextContent(type="text", text=answered)])
        session.forwarded += 1
        started = time.time()
        clock = time.perf_counter()
        try:
            result = await self._forward(name, arguments)
        except MCPError as error:
            self._record(session, CallRecord(
                tool=name, arguments=arguments, text=error.message, error=True, protocol_error=True,
                code=error.code, started=started, latency_s=time.perf_counter() - clock))
            raise
        latency = time.perf_counter() - clock
        text = _result_text(result)
        self._record(session, CallRecord(  # on the event loop: a thread hop costs more than the append and fsync
            tool=name, arguments=arguments, text=text, error=bool(result.is_error), started=started,
            latency_s=latency))
        if self.config.mode == "hybrid":
            await session.run(self._teach, session, name, arguments, text)
        return result

    def _record(self, session: _Session, call: CallRecord) -> None:
        with session.lock:
            session.journal.record(call)

    def _sim(self, session: _Session) -> ServedSession:
        if session.sim is None:
            assert self.served is not None
            session.sim = self.served.open_session(f"proxy-{session.id}")
        return session.sim

    def _book_answer(self, session: _Session, name: str, arguments: dict[str, Any]) -> str | None:
        """The book's answer when the tool only reads and the book is sure; None: forward it."""
        assert self.served is not None and self.changes is not None
        if self.changes.may_change(name):
            return None
        try:
            action = action_for_call(self.served.book, name, arguments)
        except (UnknownToolError, ToolArgumentError):
            return None
        sim = self._sim(session)
        judged = assess(sim.model, action)
        if judged.source is None or judged.route.startswith("fallback") or judged.expected_error > self.config.max_error:
            return None  # nothing answers, only a guess does (nearest evidence), or the held-out record says no
        return sim.play(action).prediction.observation

    def _teach(self, session: _Session, name: str, arguments: dict[str, Any], text: str) -> None:
        """The upstream's answer into the simulator's history, state and saved session (teacher forcing)."""
        assert self.served is not None and self.changes is not None
        sim = self._sim(session)
        try:
            action = action_for_call(self.served.book, name, arguments)
        except (UnknownToolError, ToolArgumentError):
            action = Action(name=name, arguments=arguments)
        expected = sim.session.revision
        sim.model.observe(action, text)  # type: ignore[attr-defined]  # checked in __init__
        taken = sim.model.history[-1].action  # type: ignore[attr-defined]
        prediction = Prediction(observation=text, state=copy.deepcopy(sim.model.state),  # type: ignore[attr-defined]
                                audit=Audit(route="upstream", source="upstream",
                                            notes=[f"forwarded: {self.changes.reason(name)}"]))
        sim.session.commit(TurnRecord(action=taken, prediction=prediction), expected)


async def _all_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def _result_text(result: types.CallToolResult) -> str:
    """A tool result as the text a trace stores: its text parts joined; other parts (images, resources) as JSON;
    structured content when the result has nothing else."""
    parts = []
    for item in result.content:
        if isinstance(item, types.TextContent):
            parts.append(item.text)
        else:
            parts.append(orjson.dumps(item.model_dump(mode="json", by_alias=True, exclude_none=True)).decode())
    if not parts and result.structured_content is not None:
        parts.append(orjson.dumps(result.structured_content).decode())
    return "\n".join(parts)


def _append_line(path: Path, value: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "ab") as handle:
        handle.write(orjson.dumps(value) + b"\n")
        handle.flush()
        os.fsync(handle.fileno())


def build_proxy_server(proxy: McpProxy) -> Server[Any]:
    """The MCP server a client talks to (record / hybrid): the upstream's tools, each call through `proxy`."""

    @contextlib.asynccontextmanager
    async def lifespan(_: Server[Any]) -> AsyncIterator[dict[str, Any]]:
        async with proxy.connected():
            yield {}

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=proxy.tools)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        owner = owner_of(ctx, proxy.end)
        return await proxy.call(owner.key, params.name, dict(params.arguments or {}))

    return Server(
        "worldsmith-proxy",
        version=__version__,
        instructions=f"A worldsmith proxy ({proxy.config.mode}) in front of {proxy.config.upstream}.",
        lifespan=lifespan,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def run_proxy_stdio(proxy: McpProxy) -> None:
    """Serve one client on standard input/output until it disconnects."""
    if proxy.config.mode == "replay":
        from worldsmith.serve.mcp_server import run_mcp_stdio

        assert proxy.served is not None
        run_mcp_stdio(proxy.served)
        return
    asyncio.run(serve_stdio(build_proxy_server(proxy)))


def run_proxy_http(
    proxy: McpProxy,
    *,
    host: str = "127.0.0.1",
    port: int = 8767,
    security: ServeSecurity | None = None,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    max_sessions: int | None = DEFAULT_MAX_SESSIONS,
) -> None:
    """Serve clients at `http://HOST:PORT/mcp` behind the same guard as `serve --mcp --transport http`."""
    import uvicorn

    security = security or ServeSecurity(max_response_bytes=None)
    warning = bind_warning(host, security)
    if warning:
        print(warning, file=sys.stderr, flush=True)
    if proxy.config.mode == "replay":
        from worldsmith.serve.mcp_server import build_mcp_http_app

        assert proxy.served is not None
        app = build_mcp_http_app(proxy.served, host=host, security=security, idle_timeout=idle_timeout,
                                 max_sessions=max_sessions)
    else:
        app = guarded_http_app(build_proxy_server(proxy), host=host, security=security, idle_timeout=idle_timeout,
                               max_sessions=max_sessions)
    uvicorn.run(app, host=host, port=port, log_level="warning")
