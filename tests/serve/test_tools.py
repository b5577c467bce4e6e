"""A worldbook's actions as tools: learned schemas, and calls mapped to the actions traces record."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import jsonschema
import pytest

from helpers import sample_episodes
from worldsmith.envs import as_action
from worldsmith.serve import (
    CLOSE_SESSION_TOOL,
    ToolArgumentError,
    UnknownToolError,
    action_for_call,
    book_tools,
    close_tool,
    serve_commands,
)
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook import Worldbook
from worldsmith.worldbook.model import Evidence


@pytest.fixture(scope="module")
def bfcl_book() -> Worldbook:
    return build_simulator_book(sample_episodes("bfcl"), name="bfcl").book


@pytest.fixture(scope="module")
def alfworld_book() -> Worldbook:
    return build_simulator_book(sample_episodes("alfworld"), name="alfworld").book


def test_tools_carry_the_learned_schema_with_evidence_descriptions(bfcl_book: Worldbook) -> None:
    tools = {tool.name: tool for tool in book_tools(bfcl_book)}
    assert list(tools) == [spec.name for spec in bfcl_book.action_schema.actions]
    tail = tools["tail"].input_schema
    jsonschema.Draft202012Validator.check_schema(tail)
    assert tail["properties"]["lines"]["type"] == "integer" and tail["properties"]["file_name"]["type"] == "string"
    assert sorted(tail["required"]) == sorted(a.name for a in bfcl_book.action_schema.get("tail").arguments
                                              if a.required)
    assert '"log.txt"' in tail["properties"]["file_name"]["description"]  # a value seen in the evidence, as JSON
    assert tools["ls"].input_schema["properties"]["a"]["type"] == "boolean"
    assert "ls(a=True)" in tools["ls"].description


def test_calls_become_the_recorded_actions(bfcl_book: Worldbook, alfworld_book: Worldbook) -> None:
    bfcl_turn = sample_episodes("bfcl")[0].turns[1]  # cd(folder='workspace')
    action = action_for_call(bfcl_book, bfcl_turn.action.name, bfcl_turn.action.arguments)
    assert (action.name, action.arguments) == (bfcl_turn.action.name, bfcl_turn.action.arguments)
    assert action.raw == "cd(folder='workspace')"
    episode: Episode = sample_episodes("alfworld")[0]
    checked = 0
    for turn in episode.turns:
        spec = alfworld_book.action_schema.get(turn.action.name)
        if spec is None or not spec.pattern:
            continue
        arguments = re.fullmatch(spec.pattern, turn.action.raw or "").groupdict()
        assert action_for_call(alfworld_book, spec.name, arguments) == as_action(turn.action.raw or "")
        checked += 1
    assert checked >= 3


def test_unknown_tools_and_bad_arguments_are_refused_with_reasons(bfcl_book: Worldbook) -> None:
    with pytest.raises(UnknownToolError, match="unknown tool 'rm_rf'"):
        action_for_call(bfcl_book, "rm_rf", {})
    with pytest.raises(ToolArgumentError, match="argument 'lines': 'twenty' is not of type 'integer'"):
        action_for_call(bfcl_book, "tail", {"file_name": "log.txt", "lines": "twenty"})
    with pytest.raises(ToolArgumentError, match="'file_name' is a required property"):
        action_for_call(bfcl_book, "tail", {"lines": 3})
    with pytest.raises(ToolArgumentError, match="'force' was unexpected"):
        action_for_call(bfcl_book, "cd", {"folder": "x", "force": True})


def test_serve_commands_are_exact_and_quoted(tmp_path: Path) -> None:
    commands = serve_commands("my book", version="v0002", workspace=str(tmp_path), mcp_port=9001, env_port=9002,
                              executable=["worldsmith"])
    assert commands.mcp_stdio == f"worldsmith serve 'my book' --version v0002 --workspace {tmp_path} --mcp"
    assert commands.mcp_url == "http://127.0.0.1:9001/mcp" and commands.env_url == "http://127.0.0.1:9002"
    assert commands.http_env.endswith("--http --host 127.0.0.1 --port 9002")
    entry = commands.client_config["mcpServers"]["worldsmith-my book"]
    assert [entry["command"], *entry["args"]] == ["worldsmith", "serve", "my book", "--version", "v0002",
                                                  "--workspace", str(tmp_path), "--mcp"]


def test_the_close_tool_never_shadows_an_action_of_the_book(bfcl_book: Worldbook) -> None:
    assert close_tool(bfcl_book).name == CLOSE_SESSION_TOOL
    jsonschema.Draft202012Validator.check_schema(close_tool(bfcl_book).input_schema)
    actions = bfcl_book.action_schema.model_copy(
        update={"actions": [*bfcl_book.action_schema.actions,
                            bfcl_book.action_schema.actions[0].model_copy(update={"name": CLOSE_SESSION_TOOL})]}
    )
    clashing = bfcl_book.model_copy(update={"action_schema": actions})
    assert close_tool(clashing).name == f"worldsmith_{CLOSE_SESSION_TOOL}"
    assert CLOSE_SESSION_TOOL in [tool.name for tool in book_tools(clashing)]  # the book's own action still served


def test_the_commands_start_the_worldsmith_beside_this_python_by_absolute_path(tmp_path: Path) -> None:
    """An MCP client starts the server outside the virtual environment: a bare `worldsmith` is not on its PATH."""
    entry = serve_commands("b", workspace=str(tmp_path)).client_config["mcpServers"]["worldsmith-b"]
    command = Path(entry["command"])
    assert command.is_absolute() and command.is_file() and entry["args"][:2] in (["serve", "b"], ["-m", "worldsmith"])
    assert serve_commands("b").mcp_stdio.startswith(shlex.quote(str(command)) + " ")


def test_argument_descriptions_show_values_as_json_folded_cleanly(bfcl_book: Worldbook) -> None:
    """Seen values are JSON (what a client sends), and a long one is folded without leaving a token or bracket open."""
    spec, name = next((s, a.name) for s in bfcl_book.action_schema.actions for a in s.arguments if not a.description)
    long_value = {"date": "2024-05-01", "refund": {"amount": 12.5, "items": [{"sku": "x" * 40, "qty": 2}] * 3}}
    evidence = Evidence(turn_id="ep9#0", action=spec.name, action_text=spec.name, observation="ok",
                        arguments={name: long_value})
    book = bfcl_book.model_copy(update={"evidence": [evidence]})
    argument = next(t for t in book_tools(book) if t.name == spec.name).input_schema["properties"][name]
    shown = argument["description"].removeprefix("seen in the evidence: ")
    assert shown.startswith('{"date": "2024-05-01", "refund": {') and "'" not in shown and "…" in shown
    assert shown.count("{") == shown.count("}") and shown.count("[") == shown.count("]") and shown.count('"') % 2 == 0
    assert len(shown) <= 60
