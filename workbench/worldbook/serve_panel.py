""""Serve this worldbook": the MCP tools a client will see and the exact commands that serve the book."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import streamlit as st

from worldsmith.serve import ToolSpec, book_tools, serve_commands
from worldsmith.worldbook import Worldbook

__all__ = ["render_serve_panel", "tools_frame"]


def tools_frame(tools: list[ToolSpec]) -> pd.DataFrame:
    """One row per tool: its arguments as `name: type` (optional ones marked) and its description."""
    rows = []
    for tool in tools:
        schema = tool.input_schema
        required = set(schema.get("required", []))
        arguments = ", ".join(f"{name}: {prop.get('type', 'any')}{'' if name in required else ' (optional)'}"
                              for name, prop in schema.get("properties", {}).items())
        rows.append({"tool": tool.name, "arguments": arguments, "description": tool.description})
    return pd.DataFrame(rows, columns=["tool", "arguments", "description"])


def render_serve_panel(book: Worldbook, name: str, version: str | None, workspace: Path) -> None:
    """An expander with the tool list, the MCP (stdio, HTTP) and HTTP env commands, and a client config."""
    with st.expander("Serve this worldbook", icon=":material/hub:"):
        commands = serve_commands(name, version=version, workspace=str(workspace))
        tools = book_tools(book)
        st.markdown(f"**MCP tools** ({len(tools)}): the book's actions with the argument schemas it learned")
        st.dataframe(tools_frame(tools), hide_index=True, key="serve_tools")
        st.markdown("**MCP over stdio** (an agent framework starts the server; each connection is a saved session)")
        st.code(commands.mcp_stdio, language="bash")
        st.markdown("**MCP client configuration** (e.g. an `mcpServers` entry)")
        st.code(json.dumps(commands.client_config, indent=2), language="json")
        st.markdown("**MCP over streamable HTTP**")
        st.code(f"{commands.mcp_http}\n# endpoint: {commands.mcp_url}", language="bash")
        st.markdown("**The environment over HTTP** (reset / step / close for RL trainers)")
        st.code(f"{commands.http_env} --tasks EPISODES.jsonl", language="bash")
        st.code(commands.http_client, language="python")
