"""The Worldbook page's "Serve this worldbook" expander under AppTest: tools, exact commands, client config."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

from helpers import sample_episodes
from workbench.common.text import md_escape as plain
from worldsmith.serve import book_tools
from worldsmith.serve.commands import worldsmith_command
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.worldbook import WorldbookStore

PAGE = REPO / "pages" / "worldbook.py"


def open_panel(at: AppTest) -> AppTest:
    """Open the expander, as a click does (its content is drawn once it is open)."""
    at.session_state["wb_serve"] = True
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_the_panel_shows_the_tools_and_the_commands_that_serve_them(empty_root: Path) -> None:
    book = build_simulator_book(sample_episodes("bfcl"), name="bfcl").book
    WorldbookStore(empty_root / "worldbooks").save(book)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at = at.switch_page(str(PAGE)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.label == "Serve this worldbook" for e in at.expander)
    assert not any("--mcp" in code.value for code in at.code)  # closed: not drawn
    at = open_panel(at)
    tools = next(df.value for df in at.dataframe if "tool" in df.value.columns)
    assert list(tools["tool"]) == [tool.name for tool in book_tools(book)]
    assert tools.set_index("tool").loc["tail", "arguments"] == "file_name: string, lines: integer"
    codes = [code.value for code in at.code]
    stdio = next(code for code in codes if code.endswith("--mcp"))
    # the venv's worldsmith by absolute path: an MCP client started outside the venv has no `worldsmith` on PATH
    assert shlex.split(stdio) == [*worldsmith_command(), "serve", "bfcl", "--workspace", str(empty_root), "--mcp"]
    assert Path(shlex.split(stdio)[0]).is_absolute()
    config = json.loads(next(code for code in codes if code.startswith("{")))
    entry = config["mcpServers"]["worldsmith-bfcl"]
    assert [entry["command"], *entry["args"]] == shlex.split(stdio)
    assert any("--transport http" in code and "/mcp" in code for code in codes)
    assert any("--http --host 127.0.0.1 --port 8766" in code for code in codes)
    assert any("HttpEnv('http://127.0.0.1:8766')" in code for code in codes)


def test_the_access_options_reach_the_http_commands_and_warn_about_an_open_bind(empty_root: Path) -> None:
    WorldbookStore(empty_root / "worldbooks").save(build_simulator_book(sample_episodes("bfcl"), name="bfcl").book)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at = open_panel(at.switch_page(str(PAGE)).run())
    assert not at.warning or all("without a token" not in w.value for w in at.warning)  # loopback: no warning
    at.text_input(key="serve_host").set_value("0.0.0.0")
    at.text_input(key="serve_allow_hosts").set_value("sim.lab, gpu.lab:9000")
    at.text_input(key="serve_allow_origins").set_value("ui.lab")  # no scheme: refused, named
    at.number_input(key="serve_idle").set_value(120.0)
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(plain("serving on 0.0.0.0 without a token") in w.value for w in at.warning)
    assert any(plain("--allow-origin 'ui.lab'") in e.value for e in at.error)
    http_env = next(code.value for code in at.code if "--http --host 0.0.0.0" in code.value)
    assert "--allow-host sim.lab --allow-host gpu.lab:9000 --idle-timeout 120" in http_env
    assert "--allow-origin" not in http_env
    at.text_input(key="serve_allow_origins").set_value("https://ui.lab")
    at.checkbox(key="serve_token").check()
    at = at.run()
    assert not at.error and all("without a token" not in w.value for w in at.warning)
    assert any(plain("export WORLDSMITH_TOKEN=") in c.value for c in at.caption)
    mcp_http = next(code.value for code in at.code if "--transport http" in code.value)
    assert "--allow-origin https://ui.lab" in mcp_http
    at.checkbox(key="serve_token").uncheck()
    at.text_input(key="serve_token_file").set_value("/etc/worldsmith/tokens.txt")  # one token per client
    at = at.run()
    assert not at.error and all("without a token" not in w.value for w in at.warning)
    assert any(plain("own MCP session names") in c.value for c in at.caption)
    http_commands = [code.value for code in at.code if "--host" in code.value]  # MCP over HTTP and the HTTP env
    assert len(http_commands) == 2 and all("--token-file /etc/worldsmith/tokens.txt" in c for c in http_commands)


def test_the_panel_gives_ready_proxy_commands_with_the_absolute_worldsmith(empty_root: Path) -> None:
    WorldbookStore(empty_root / "worldbooks").save(build_simulator_book(sample_episodes("bfcl"), name="bfcl").book)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at = open_panel(at.switch_page(str(PAGE)).run())
    at.text_input(key="serve_upstream").set_value("mcp-server-sqlite --db-path 'my shop.db'")
    at = at.run()
    assert not at.exception, [e.value for e in at.exception]
    block = next(code.value for code in at.code if "proxy --mode record" in code.value)
    lines = [line for line in block.splitlines() if not line.startswith("#")]
    record, replay, hybrid = (shlex.split(line) for line in lines)
    program = worldsmith_command()
    assert Path(program[0]).is_absolute()
    assert record == [*program, "proxy", "--mode", "record", "--dataset", "bfcl", "--workspace", str(empty_root),
                      "--", "mcp-server-sqlite", "--db-path", "my shop.db"]
    assert replay == [*program, "proxy", "--mode", "replay", "--book", "bfcl", "--workspace", str(empty_root)]
    assert hybrid[hybrid.index("--mode") + 1] == "hybrid" and hybrid[-4:] == record[-4:]
    assert hybrid[hybrid.index("--stats") + 1] == f"{empty_root}/runs/proxy/bfcl/stats.jsonl"
