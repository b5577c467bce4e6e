"""Serving a worldbook simulator to other processes: an MCP server and the `Env` protocol over HTTP.

    served = ServedWorldbook(ServeConfig(book="bfcl"))
    run_mcp_stdio(served)                      # agents that speak MCP: one Session per connection
    app = build_env_app(lambda: served.sim_env(episodes))   # trainers: reset/step/close over HTTP
    env = HttpEnv("http://127.0.0.1:8766")     # ...and the client, an `Env` like any other

Over HTTP both servers sit behind `GuardMiddleware` (`ServeSecurity`: Host/Origin allow-lists,
loopback by default; optional bearer tokens, one per client if you like, or `$WORLDSMITH_TOKEN`;
body size limits). Sessions / env instances belong to the client (MCP session, connection or
token) that opened them, are closed by it (`close_session`, `POST /close`) or when they go idle,
and a closed or expired one fails with why when used again (`SessionEndedError`). The MCP and HTTP parts need the `serve` extra (mcp, fastapi,
uvicorn, httpx); they load on first use, so the tool schemas (`book_tools`, used by the workbench)
work without it.

Exported: the served book (`ServeConfig`, `ServedWorldbook`), the MCP server (`build_mcp_server`,
`run_mcp_stdio`, `run_mcp_http`), the HTTP `Env` (`build_env_app`, `HttpEnv`), the guard (`ServeSecurity`,
`GuardMiddleware`), the tool schemas (`book_tools`, `ToolSpec`), the proxy in front of another MCP server
(`McpProxy`, `ProxyConfig`: record, replay, hybrid; `serve.proxy`) and the command lines the workbench shows
(`serve_commands`, `proxy_commands`). Request/response models, credential helpers and session lifetimes: import from their modules.
"""

from __future__ import annotations

import importlib
from typing import Any

from worldsmith.serve.commands import (
    DEFAULT_ENV_PORT,
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    DEFAULT_MCP_PORT,
    ProxyCommands,
    ServeCommands,
    proxy_commands,
    serve_commands,
)
from worldsmith.serve.guard import (
    TOKEN_ENV,
    GuardMiddleware,
    ServeSecurity,
    bind_warning,
    read_token_file,
    serve_security,
)
from worldsmith.serve.lifetimes import SessionEndedError
from worldsmith.serve.simulator import ServeConfig, ServedSession, ServedWorldbook, task_episodes
from worldsmith.serve.tool_schemas import (
    CLOSE_SESSION_TOOL,
    ToolArgumentError,
    ToolSpec,
    UnknownToolError,
    action_for_call,
    book_tools,
    call_text,
    close_tool,
)

__all__ = [
    "CLOSE_SESSION_TOOL",
    "DEFAULT_ENV_PORT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MCP_PORT",
    "SESSION_META_KEY",
    "TOKEN_ENV",
    "GuardMiddleware",
    "HttpEnv",
    "McpProxy",
    "ProxyCommands",
    "ProxyConfig",
    "ServeCommands",
    "ServeConfig",
    "ServeSecurity",
    "ServedSession",
    "ServedWorldbook",
    "SessionEndedError",
    "SessionRegistry",
    "ToolArgumentError",
    "ToolSpec",
    "UnknownSessionError",
    "UnknownToolError",
    "action_for_call",
    "bind_warning",
    "book_tools",
    "build_env_app",
    "build_mcp_http_app",
    "build_mcp_server",
    "call_text",
    "close_tool",
    "proxy_commands",
    "read_token_file",
    "run_mcp_http",
    "run_mcp_stdio",
    "serve_commands",
    "serve_security",
    "task_episodes",
]

_LAZY = {
    name: "worldsmith.serve.http_env"
    for name in ("HttpEnv", "build_env_app")
}
_LAZY.update({name: "worldsmith.serve.proxy" for name in ("McpProxy", "ProxyConfig")})
_LAZY.update(
    {
        name: "worldsmith.serve.mcp_server"
        for name in (
            "SESSION_META_KEY",
            "SessionRegistry",
            "UnknownSessionError",
            "build_mcp_http_app",
            "build_mcp_server",
            "run_mcp_http",
            "run_mcp_stdio",
        )
    }
)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'worldsmith.serve' has no attribute {name!r}")
