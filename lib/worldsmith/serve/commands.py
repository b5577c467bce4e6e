"""The exact commands (and an MCP client config) that serve a worldbook: what the CLI and the workbench show."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from worldsmith.serve.guard import TOKEN_ENV
from worldsmith.sim.factory import DEFAULT_WORLD_MODEL

__all__ = [
    "DEFAULT_ENV_PORT",
    "DEFAULT_IDLE_TIMEOUT",
    "DEFAULT_MAX_SESSIONS",
    "DEFAULT_MCP_PORT",
    "DEFAULT_PROXY_PORT",
    "ProxyCommands",
    "ServeCommands",
    "proxy_commands",
    "serve_commands",
    "worldsmith_command",
]

DEFAULT_MCP_PORT = 8765
DEFAULT_ENV_PORT = 8766
DEFAULT_PROXY_PORT = 8767
DEFAULT_IDLE_TIMEOUT = 600.0
"""Seconds an MCP session or env instance may go unused before the server closes it."""
DEFAULT_MAX_SESSIONS = 256
"""Most MCP sessions (per kind of client) or env instances one HTTP server keeps open."""


def worldsmith_command() -> list[str]:
    """How another process starts this worldsmith, by absolute path: the `worldsmith` script beside this Python (a
    virtual environment's bin/, which an MCP client started outside it does not have on its PATH), else the one on
    PATH, else this Python with `-m worldsmith`."""
    script = Path(os.path.abspath(sys.executable)).parent / ("worldsmith.exe" if os.name == "nt" else "worldsmith")
    if script.is_file():
        return [str(script)]
    found = shutil.which("worldsmith")
    return [os.path.abspath(found)] if found else [os.path.abspath(sys.executable), "-m", "worldsmith"]


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
    executable: Sequence[str] | None = None,
) -> ServeCommands:
    """Commands for MCP over stdio and HTTP and for the HTTP env; the stdio one as an `mcpServers` entry.

    The HTTP commands carry the allow-lists and limits that differ from the defaults; `token`: the
    servers will need $WORLDSMITH_TOKEN (never written into a command, where `ps` would show it);
    `token_file`: they accept the tokens in that file (`--token-file`, one per client; its path, not
    its tokens, goes into the commands). `executable`: what starts worldsmith (default `worldsmith_command()`, an
    absolute path, so the commands and the client config work from any shell or client).
    """
    base = [
        *(executable if executable is not None else worldsmith_command()),
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


class ProxyCommands(BaseModel):
    """`worldsmith proxy` for a book: record more sessions, stand in for the server, or both."""

    model_config = ConfigDict(extra="forbid")

    record: str
    replay: str
    hybrid: str
    replay_http: str
    replay_url: str


def proxy_commands(
    book: str,
    *,
    dataset: str | None = None,
    version: str | None = None,
    workspace: str | None = None,
    upstream: str = "UPSTREAM-COMMAND",
    host: str = "127.0.0.1",
    port: int = DEFAULT_PROXY_PORT,
    program: Sequence[str] | None = None,
) -> ProxyCommands:
    """The proxy commands for `book`: `record` into `dataset` (default: the book's name) in front of `upstream`
    (the upstream server's command line, as the shell would take it), `replay` from the book alone, `hybrid`
    (the book where it is sure, the upstream otherwise), with per-session stats beside the workspace."""
    head = [*(program or worldsmith_command()), "proxy"]
    where = ["--workspace", workspace] if workspace else []
    pinned = ["--version", version] if version else []
    target = dataset or book
    tail = f" -- {upstream}"
    replay = [*head, "--mode", "replay", "--book", book, *pinned, *where]
    replay_http = [*replay, "--transport", "http", "--host", host, "--port", str(port)]
    stats = f"{workspace}/runs/proxy/{target}/stats.jsonl" if workspace else f"proxy-{target}-stats.jsonl"
    return ProxyCommands(
        record=shlex.join([*head, "--mode", "record", "--dataset", target, *where]) + tail,
        replay=shlex.join(replay),
        hybrid=shlex.join([*head, "--mode", "hybrid", "--book", book, *pinned, "--dataset", target, *where,
                           "--stats", stats]) + tail,
        replay_http=shlex.join(replay_http),
        replay_url=f"http://{host}:{port}/mcp",
    )
