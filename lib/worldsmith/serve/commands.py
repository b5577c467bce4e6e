"""The exact commands (and an MCP client config) that serve a worldbook: what the CLI and the workbench show."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from worldsmith.serve.guard import TOKEN_ENV
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL

__all__ = [
    "DEFAULT_ENV_PORT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MCP_PORT",
    "ServeCommands",
    "serve_commands",
]

DEFAULT_MCP_PORT = 8765
DEFAULT_ENV_PORT = 8766
DEFAULT_IDLE_TIMEOUT = 600.0
"""Seconds an MCP session or env instance may go unused before the server closes it."""
DEFAULT_MAX_SESSIONS = 256
"""Most MCP sessions (per kind of client) or env instances one HTTP server keeps open."""


class ServeCommands(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mcp_stdio: str
    mcp_http: str
    mcp_url: str
    http_env: str
    env_url: str
    client_config: dict[str, Any]
    http_client: str
    token_note: str | None = None


def serve_commands(
    book: str,
    *,
    version: str | None = None,
    method: str = DEFAULT_WORLD_MODEL,
    workspace: str | None = None,
    host: str = "127.0.0.1",
    mcp_port: int = DEFAULT_MCP_PORT,
    env_port: int = DEFAULT_ENV_PORT,
    allow_hosts: Sequence[str] = (),
    allow_origins: Sequence[str] = (),
    token: bool = False,
    token_file: str | None = None,
    idle_timeout: float = DEFAULT_IDLE_TIMEOUT,
    max_sessions: int = DEFAULT_MAX_SESSIONS,
) -> ServeCommands:
    """Commands for MCP over stdio and HTTP and for the HTTP env; the stdio one as an `mcpServers` entry.

    The HTTP commands carry the allow-lists and limits that differ from the defaults; `token`: the
    servers will need $WORLDSMITH_TOKEN (never written into a command, where `ps` would show it);
    `token_file`: they accept the tokens in that file (`--token-file`, one per client; its path, not
    its tokens, goes into the commands).
    """
    base = [
        "worldsmith",
        "serve",
        book,
        *(["--version", version] if version else []),
        *(["--method", method] if method != DEFAULT_WORLD_MODEL else []),
        *(["--workspace", workspace] if workspace else []),
    ]
    guard = [
        *(flag for name in allow_hosts for flag in ("--allow-host", name)),
        *(flag for origin in allow_origins for flag in ("--allow-origin", origin)),
        *(["--token-file", token_file] if token_file else []),
        *(["--idle-timeout", f"{idle_timeout:g}"] if idle_timeout != DEFAULT_IDLE_TIMEOUT else []),
        *(["--max-sessions", str(max_sessions)] if max_sessions != DEFAULT_MAX_SESSIONS else []),
    ]
    stdio = [*base, "--mcp"]
    env_url = f"http://{host}:{env_port}"
    return ServeCommands(
        mcp_stdio=shlex.join(stdio),
        mcp_http=shlex.join([*base, "--mcp", "--transport", "http", "--host", host, "--port", str(mcp_port), *guard]),
        mcp_url=f"http://{host}:{mcp_port}/mcp",
        http_env=shlex.join([*base, "--http", "--host", host, "--port", str(env_port), *guard]),
        env_url=env_url,
        client_config={"mcpServers": {f"worldsmith-{book}": {"command": stdio[0], "args": stdio[1:]}}},
        http_client=f"from worldsmith.serve import HttpEnv\nenv = HttpEnv({env_url!r})\nobservation, info = env.reset()",
        token_note=(
            f"each client sends its own token from {token_file} as 'Authorization: Bearer ...' (HttpEnv: token= "
            f"or ${TOKEN_ENV}); each token has its own MCP session names and env instances"
            if token_file
            else f"export {TOKEN_ENV}=... before starting the HTTP servers (or give --token-file FILE: one token "
            "per client, each its own namespace of MCP session names); clients send theirs as "
            "'Authorization: Bearer ...' (HttpEnv reads the same variable)"
        )
        if token or token_file
        else None,
    )
