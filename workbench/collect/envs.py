"""Widgets shared by the Collect and Play pages: environment picker, MCP server fields, task picker, transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.envs import EnvError, collect, registry


@st.cache_data(show_spinner="Listing the environment's tasks…", ttl=3600)
def cached_tasks(env: str, kwargs_items: tuple[tuple[str, Any], ...] = ()) -> tuple[list[str], str | None]:
    """Task ids of an environment (cached: listing may start a JVM); (ids, error message)."""
    try:
        return collect.list_tasks(env, dict(kwargs_items)), None
    except (EnvError, ImportError, OSError, ValueError) as error:
        return [], f"{type(error).__name__}: {error}" if isinstance(error, ImportError) else str(error)


def render_env_picker(key: str) -> str | None:
    """A select box of the registered environments; unavailable ones say what to install."""
    specs = registry()
    names = sorted(specs)
    labels = {name: name + ("" if not specs[name].missing() else "  (not installed)") for name in names}
    name = st.selectbox("Environment", names, format_func=labels.__getitem__, key=key, index=None,
                        placeholder="Choose an environment")
    if name is None:
        return None
    chosen = specs[name]
    st.caption(md_escape(chosen.description))
    if chosen.missing():
        st.error(f"{md_code(name)} needs {md_escape(', '.join(chosen.missing()))}: {md_escape(chosen.install_hint)}",
                 icon=":material/error:")
        return None
    return name


def render_mcp_server(key: str) -> dict[str, Any] | None:
    """The MCP server the `mcp` environment is (a command or a URL, a tasks file, a reset command): its constructor
    arguments, or None until a command or URL is given."""
    st.caption("Any MCP server: a command started for each episode (stdio) or a server at a URL (streamable "
               "HTTP). The fields are what `worldsmith collect mcp --server-command … --server-tasks … "
               "--server-reset …` takes.")
    how = st.radio("MCP server", ["command", "URL"], horizontal=True, key=f"{key}_mcp_how",
                   format_func={"command": "a command (stdio)", "URL": "a URL (streamable HTTP)"}.__getitem__)
    kwargs: dict[str, Any] = {}
    if how == "command":
        command = st.text_input("Server command", key=f"{key}_mcp_command",
                                placeholder="mcp-server-sqlite --db-path work.db",
                                help="A program and its arguments (no shell); a new process for each episode")
        if command.strip():
            kwargs["command"] = command.strip()
    else:
        url = st.text_input("Server URL", key=f"{key}_mcp_url", placeholder="http://127.0.0.1:8000/mcp",
                            help="The server's streamable HTTP endpoint; a new MCP session for each episode")
        if url.strip():
            kwargs["url"] = url.strip()
    left, right = st.columns(2)
    tasks = left.text_input("Tasks file (optional)", key=f"{key}_mcp_tasks", placeholder="tasks.jsonl",
                            help="JSON or JSONL of {id, instruction, ground_truth: [{name, arguments}], answer}; "
                                 "without one there is one open task, for probing the tools")
    reset = right.text_input("Reset command (optional)", key=f"{key}_mcp_reset", placeholder="cp base.db work.db",
                             help="Run before each episode (no shell), e.g. to restore a database file")
    if tasks.strip():
        kwargs["tasks"] = str(Path(tasks.strip()).expanduser().resolve())
    if reset.strip():
        kwargs["reset"] = reset.strip()
    if "command" not in kwargs and "url" not in kwargs:
        st.info(f"Give the server's {'command' if how == 'command' else 'URL'}.", icon=":material/info:")
        return None
    return kwargs


TASK_OPTIONS_SHOWN = 1000  # a browser select of 20,000 options (toolshop's tasks) is slow to send and to scroll


def shown_tasks(tasks: list[str], needle: str) -> list[str]:
    """The first `TASK_OPTIONS_SHOWN` task ids containing `needle` (any case)."""
    needle = needle.strip().lower()
    return [task for task in tasks if needle in task.lower()][:TASK_OPTIONS_SHOWN]


def render_task_picker(env: str, key: str, *, multiple: bool, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    """Tasks from the environment's list, plus ids typed by hand (e.g. a TextWorld generator spec)."""
    tasks, error = cached_tasks(env, tuple(sorted((env_kwargs or {}).items())))
    if error:
        st.warning(f"Could not list the tasks of {md_code(env)}: {md_escape(error)}", icon=":material/warning:")
    known = len(tasks)
    if known > TASK_OPTIONS_SHOWN:
        needle = st.text_input(f"Filter the {known:,} tasks", key=f"{key}_filter",
                               help=f"The pickers list at most {TASK_OPTIONS_SHOWN:,} tasks: those whose id contains this")
        tasks = shown_tasks(tasks, needle)
    if multiple:
        chosen = st.multiselect(f"Tasks ({known:,} known; none chosen = all)", tasks, key=f"{key}_pick",
                                max_selections=500)
    else:
        picked = st.selectbox(f"Task ({known:,} known)", tasks, key=f"{key}_pick", index=0 if tasks else None)
        chosen = [picked] if picked else []
    typed = st.text_input("…or task ids, one per line or comma-separated", key=f"{key}_typed",
                          help="Any id the environment accepts, including ones not in its list")
    extra = [t.strip() for line in typed.splitlines() for t in line.split(",") if t.strip()]
    return extra + chosen if multiple else (extra[:1] or chosen)


def render_transcript(initial: str, steps: list[dict[str, Any]]) -> None:
    """The opening observation, then each action and what the environment answered."""
    st.code(initial, language=None, wrap_lines=True)
    for step in steps:
        with st.chat_message("user", avatar=":material/keyboard:"):
            st.markdown(md_code(step["action"]))
        with st.chat_message("assistant", avatar=":material/public:"):
            st.code(step["observation"] or "(no output)", language=None, wrap_lines=True)
            notes = [f"reward {step['reward']:g}"]
            if step.get("done"):
                notes.append("episode over")
            if step.get("won") is not None:
                notes.append("won" if step["won"] else "not won")
            st.caption(" · ".join(notes))
