"""The exact commands (and an MCP client config) that serve a worldbook: what the CLI and the workbench show."""

from __future__ import annotations

import shlex
from typing import Any

from pydantic import BaseModel, ConfigDict

from worldsmith.sim.factory import DEFAULT_WORLD_MODEL

__all__ = ["DEFAULT_ENV_PORT", "DEFAULT_MCP_PORT", "ServeCommands", "serve_commands"]

DEFAULT_MCP_PORT = 8765
DEFAULT_ENV_PORT = 8766


class ServeCommands(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mcp_stdio: str
    mcp_http: str
    mcp_url: str
    http_env: str
    env_url: str
    client_config: dict[str, Any]
    http_client: str


def serve_commands(book: str, *, version: str | None = None, method: str = DEFAULT_WORLD_MODEL,
                   workspace: str | None = None, host: str = "127.0.0.1", mcp_port: int = DEFAULT_MCP_PORT,
                   env_port: int = DEFAULT_ENV_PORT) -> ServeCommands:
    """Commands for MCP over stdio and HTTP and for the HTTP env; the stdio one as an `mcpServers` entry."""
    base = ["worldsmith", "serve", book, *(["--version", version] if version else []),
            *(["--method", method] if method != DEFAULT_WORLD_MODEL else []),
            *(["--workspace", workspace] if workspace else [])]
    stdio = [*base, "--mcp"]
    env_url = f"http://{host}:{env_port}"
    return ServeCommands(
        mcp_stdio=shlex.join(stdio),
        mcp_http=shlex.join([*base, "--mcp", "--transport", "http", "--host", host, "--port", str(mcp_port)]),
        mcp_url=f"http://{host}:{mcp_port}/mcp",
        http_env=shlex.join([*base, "--http", "--host", host, "--port", str(env_port)]),
        env_url=env_url,
        client_config={"mcpServers": {f"worldsmith-{book}": {"command": stdio[0], "args": stdio[1:]}}},
        http_client=f"from worldsmith.serve import HttpEnv\nenv = HttpEnv({env_url!r})\nobservation, info = env.reset()",
    )
