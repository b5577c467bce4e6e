"""`worldsmith serve` as a subprocess: what it would serve (--describe --json) and its clear refusals."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from helpers import sample_episodes
from worldsmith.serve.commands import worldsmith_command
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.worldbook import WorldbookStore

pytestmark = pytest.mark.slow  # runs `python -m worldsmith` in a subprocess per test


def run(*args: str, workspace: Path, code: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "WORLDSMITH_WORKSPACE": str(workspace), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "worldsmith", "serve", *args], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode == code, result.stderr + result.stdout
    return result


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("serve-cli")
    WorldbookStore(root / "worldbooks").save(build_simulator_book(sample_episodes("bfcl"), name="bfcl").book)
    return root


def test_describe_lists_tools_endpoints_and_commands(workspace: Path) -> None:
    mcp = orjson.loads(
        run(
            "bfcl", "--mcp", "--transport", "http", "--port", "9123", "--describe", "--json", workspace=workspace
        ).stdout
    )
    assert mcp["endpoint"] == "http://127.0.0.1:9123/mcp" and mcp["book"].startswith("bfcl@v0001")
    tools = {tool["name"]: tool for tool in mcp["tools"]}
    assert tools["tail"]["input_schema"]["properties"]["lines"]["type"] == "integer"
    assert mcp["close_tool"] == "close_session" and "close_session" not in tools  # the server's, not the book's
    worldsmith = shlex.join(worldsmith_command())
    assert mcp["commands"]["stdio"] == f"{worldsmith} serve bfcl --workspace {workspace} --mcp"
    server = mcp["client_config"]["mcpServers"]["worldsmith-bfcl"]
    assert server["args"][-1] == "--mcp"
    env = orjson.loads(run("bfcl", "--http", "--port", "9124", "--describe", "--json", workspace=workspace).stdout)
    assert env["endpoint"] == "http://127.0.0.1:9124" and "POST /step" in env["routes"]
    text = run("bfcl", "--mcp", "--describe", workspace=workspace).stdout
    assert "tools (" in text and "tail: file_name, lines" in text


def test_describe_without_a_mode_describes_both_and_names_the_executable_by_path(workspace: Path) -> None:
    both = orjson.loads(run("bfcl", "--describe", "--json", workspace=workspace).stdout)
    assert {tool["name"] for tool in both["tools"]} >= {"tail", "cd"}
    assert both["endpoint"] == {"mcp_stdio": "stdio", "mcp_http": "http://127.0.0.1:8765/mcp",
                                "http_env": "http://127.0.0.1:8766"}
    executable = Path(shlex.split(both["commands"]["mcp_stdio"])[0])
    assert executable.is_absolute() and executable.is_file()  # the venv's, found from any shell or MCP client
    assert both["commands"]["http_env"].split(" serve ")[1].startswith("bfcl ") and "--http" in both["commands"]["http_env"]
    entry = both["client_config"]["mcpServers"]["worldsmith-bfcl"]
    assert entry["command"] == str(executable) and Path(entry["command"]).is_absolute()
    text = run("bfcl", "--describe", workspace=workspace).stdout
    assert "tail: file_name, lines" in text and "http_env:" in text
    refused = orjson.loads(run("bfcl", "--json", workspace=workspace, code=1).stdout)
    assert "--mcp" in refused["error"] and "--http" in refused["error"]


def test_refusals_are_one_clear_line(workspace: Path) -> None:
    missing = orjson.loads(run("nobook", "--mcp", "--describe", "--json", workspace=workspace, code=4).stdout)
    assert "nobook" in missing["error"]
    assert (
        "--env"
        in orjson.loads(run("bfcl", "--mcp", "--env", "bfcl", "--json", workspace=workspace, code=1).stdout)["error"]
    )
    bad_tasks = run(
        "bfcl", "--http", "--tasks", str(workspace / "none.jsonl"), "--describe", workspace=workspace, code=3
    )
    assert "none.jsonl" in bad_tasks.stderr


def test_the_guard_flags_are_described_and_bad_ones_refused(workspace: Path) -> None:
    mcp = orjson.loads(
        run(
            "bfcl",
            "--mcp",
            "--transport",
            "http",
            "--host",
            "0.0.0.0",
            "--allow-host",
            "sim.lab",
            "--allow-origin",
            "https://ui.lab",
            "--token",
            "s3cret",
            "--idle-timeout",
            "30",
            "--describe",
            "--json",
            workspace=workspace,
        ).stdout
    )
    assert "sim.lab:*" in mcp["allowed_hosts"] and "127.0.0.1:*" in mcp["allowed_hosts"]
    assert "https://ui.lab" in mcp["allowed_origins"] and "http://localhost:*" in mcp["allowed_origins"]
    assert (mcp["token"], mcp["idle_timeout_s"]) == ("required", 30.0)
    assert "s3cret" not in orjson.dumps(mcp).decode()  # the token is never printed
    assert "--allow-host sim.lab --allow-origin https://ui.lab --idle-timeout 30" in mcp["commands"]["http"]
    env = orjson.loads(
        run(
            "bfcl",
            "--http",
            "--max-request-bytes",
            "1000",
            "--max-sessions",
            "4",
            "--describe",
            "--json",
            workspace=workspace,
        ).stdout
    )
    assert (env["max_request_bytes"], env["max_sessions"], env["token"]) == (1000, 4, "none")
    bad_origin = orjson.loads(
        run("bfcl", "--http", "--allow-origin", "ui.lab", "--describe", "--json", workspace=workspace, code=1).stdout
    )
    assert "--allow-origin 'ui.lab'" in bad_origin["error"]
    bad_size = orjson.loads(
        run("bfcl", "--http", "--max-request-bytes", "0", "--describe", "--json", workspace=workspace, code=1).stdout
    )
    assert "--max-request-bytes must be positive" in bad_size["error"]


def test_several_tokens_from_flags_and_a_file_are_counted_never_shown(workspace: Path, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("# clients\nalpha-token\nbeta-token\n")
    described = run(
        "bfcl", "--mcp", "--transport", "http", "--token", "gamma-token", "--token", "delta-token",
        "--token-file", str(tokens), "--describe", "--json", workspace=workspace,
    ).stdout
    mcp = orjson.loads(described)
    assert (mcp["token"], mcp["tokens"]) == ("required", 4)
    assert not any(name in described for name in ("alpha", "beta", "gamma", "delta"))
    tokens.write_text("alpha-token\nbeta secret\n")
    bad = orjson.loads(
        run("bfcl", "--http", "--token-file", str(tokens), "--describe", "--json", workspace=workspace, code=3).stdout
    )
    assert f"--token-file {tokens}, line 2: a token must be one word" in bad["error"] and "secret" not in bad["error"]
    assert bad["kind"] == "bad_input" and bad["where"] == f"--token-file {tokens}, line 2"
