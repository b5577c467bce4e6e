""" "Serve this worldbook": the MCP tools a client will see and the exact commands that serve the book."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import streamlit as st
from pydantic import ValidationError

from workbench.common.text import md_escape
from worldsmith.serve import (
    DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_SESSIONS,
    ServeCommands,
    ServeSecurity,
    ToolSpec,
    bind_warning,
    book_tools,
    proxy_commands,
    serve_commands,
)
from worldsmith.worldbook import Worldbook

__all__ = ["access_options", "proxy_section", "render_serve_panel", "split_names", "tools_frame"]


def tools_frame(tools: list[ToolSpec]) -> pd.DataFrame:
    """One row per tool: its arguments as `name: type` (optional ones marked) and its description."""
    rows = []
    for tool in tools:
        schema = tool.input_schema
        required = set(schema.get("required", []))
        arguments = ", ".join(
            f"{name}: {prop.get('type', 'any')}{'' if name in required else ' (optional)'}"
            for name, prop in schema.get("properties", {}).items()
        )
        rows.append({"tool": tool.name, "arguments": arguments, "description": tool.description})
    return pd.DataFrame(rows, columns=["tool", "arguments", "description"])


def split_names(text: str) -> list[str]:
    """Comma- or space-separated names from a text box, blanks dropped."""
    return [part for part in text.replace(",", " ").split() if part]


def _checked(field: str, names: list[str]) -> tuple[list[str], list[str]]:
    """The names when they are valid for `ServeSecurity.<field>`, else none and why (as plain text)."""
    try:
        ServeSecurity.model_validate({field: names})
    except ValidationError as error:
        return [], [str(e["msg"]).removeprefix("Value error, ") + " (left out of the commands)" for e in error.errors()]
    return names, []


def access_options(name: str, version: str | None, workspace: Path) -> tuple[ServeCommands, list[str], str | None]:
    """The HTTP access widgets (bind host, allow-lists, token, idle timeout, cap), the commands they make, the
    refused entries, and the warning an open bind without a token calls for (all as plain text)."""
    left, right = st.columns(2)
    host = left.text_input(
        "Bind host", value="127.0.0.1", key="serve_host", persist_state="page",
        help="127.0.0.1: this machine only; 0.0.0.0: every interface",
    )
    allow_hosts = left.text_input(
        "Also allow Host names",
        key="serve_allow_hosts", persist_state="page",
        help="--allow-host: names remote clients reach the server by (loopback always)",
    )
    allow_origins = left.text_input(
        "Also allow browser origins",
        key="serve_allow_origins", persist_state="page",
        help="--allow-origin: e.g. https://ui.example (loopback always)",
    )
    token = right.checkbox("Require a token ($WORLDSMITH_TOKEN)", key="serve_token", persist_state="page")
    token_file = right.text_input(
        "Or a token file (one token per client)", key="serve_token_file", persist_state="page",
        help="--token-file: one token per line; each client's MCP session names and env instances are its own",
    ).strip()
    idle = right.number_input(
        "Idle timeout (s, 0: never)", min_value=0.0, value=DEFAULT_IDLE_TIMEOUT, step=60.0, key="serve_idle",
        persist_state="page",
    )
    cap = right.number_input("Most sessions / env instances", min_value=1, value=DEFAULT_MAX_SESSIONS, key="serve_cap",
                             persist_state="page")
    hosts, host_errors = _checked("allow_hosts", split_names(allow_hosts))
    origins, origin_errors = _checked("allow_origins", split_names(allow_origins))
    security = ServeSecurity(allow_hosts=hosts, allow_origins=origins, token="set" if token or token_file else None)
    warning = bind_warning(host.strip() or "127.0.0.1", security)
    commands = serve_commands(
        name,
        version=version,
        workspace=str(workspace),
        host=host.strip() or "127.0.0.1",
        allow_hosts=hosts,
        allow_origins=origins,
        token=token,
        token_file=token_file or None,
        idle_timeout=float(idle),
        max_sessions=int(cap),
    )
    return commands, host_errors + origin_errors, warning.removeprefix("worldsmith: warning: ") if warning else None


def proxy_section(name: str, version: str | None, workspace: Path) -> None:
    """The `worldsmith proxy` commands for this book, in front of the server the person names (a command line)."""
    st.markdown(
        "**In front of the real MCP server** (`worldsmith proxy`): record more sessions into a dataset, stand in "
        "for the server from this book alone, or both: the book answers the reads it is sure of, every write and "
        "every doubt goes to the server, and what went there is recorded"
    )
    left, right = st.columns(2)
    upstream = left.text_input(
        "The real server's command", key="serve_upstream", persist_state="page",
        placeholder="e.g. mcp-server-sqlite --db-path shop.db",
        help="what an agent framework would start (stdio); --upstream-url URL reaches one over HTTP instead",
    ).strip()
    dataset = right.text_input(
        "Record into dataset", key="serve_proxy_dataset", persist_state="page", placeholder=name,
        help="each client session becomes one episode of this dataset (default: the book's name)",
    ).strip()
    commands = proxy_commands(name, dataset=dataset or None, version=version, workspace=str(workspace),
                              upstream=upstream or "UPSTREAM-COMMAND")
    st.code(f"# record\n{commands.record}\n# replay (no server)\n{commands.replay}\n"
            f"# hybrid (add --read-only TOOL for tools you know only read)\n{commands.hybrid}", language="bash")


def render_serve_panel(book: Worldbook, name: str, version: str | None, workspace: Path) -> None:
    """An expander with the tool list, the MCP (stdio, HTTP) and HTTP env commands, and a client config.

    Drawn once opened (a rerun on opening; the access options are kept while it is closed): its five highlighted
    commands and the tool grid cost the browser on every load of the page, collapsed (benchmarks/page_load.py)."""
    panel = st.expander("Serve this worldbook", icon=":material/hub:", key="wb_serve", on_change="rerun")
    with panel:
        if not panel.open:
            return
        tools = book_tools(book)
        commands = serve_commands(name, version=version, workspace=str(workspace))
        st.markdown(f"**MCP tools** ({len(tools)}): the book's actions with the argument schemas it learned")
        st.dataframe(tools_frame(tools), hide_index=True, key="serve_tools")
        st.markdown("**MCP over stdio** (an agent framework starts the server; each connection is a saved session)")
        st.code(commands.mcp_stdio, language="bash")
        st.markdown("**MCP client configuration** (e.g. an `mcpServers` entry)")
        st.code(json.dumps(commands.client_config, indent=2), language="json")
        st.markdown(
            "**Over HTTP: who may connect** (Host and Origin are checked against these lists on every "
            "request, so a web page cannot reach the server through DNS rebinding)"
        )
        commands, errors, warning = access_options(name, version, workspace)
        for error in errors:
            st.error(md_escape(error))
        if warning:
            st.warning(md_escape(warning))
        if commands.token_note:
            st.caption(md_escape(commands.token_note))
        st.markdown(
            "**MCP over streamable HTTP** (a client ends its session with the `close_session` tool, or it expires "
            "after the idle timeout; either way its handle then says so rather than starting over)"
        )
        st.code(f"{commands.mcp_http}\n# endpoint: {commands.mcp_url}", language="bash")
        proxy_section(name, version, workspace)
        st.markdown("**The environment over HTTP** (reset / step / close for RL trainers)")
        st.code(f"{commands.http_env} --tasks EPISODES.jsonl", language="bash")
        st.code(commands.http_client, language="python")
