"""The Worldbook page's "Serve this worldbook" expander under AppTest: tools, exact commands, client config."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

from helpers import sample_episodes
from worldsmith.serve import book_tools
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.worldbook import WorldbookStore

PAGE = REPO / "pages" / "worldbook.py"


def test_the_panel_shows_the_tools_and_the_commands_that_serve_them(empty_root: Path) -> None:
    book = build_simulator_book(sample_episodes("bfcl"), name="bfcl").book
    WorldbookStore(empty_root / "worldbooks").save(book)
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at = at.switch_page(str(PAGE)).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(e.label == "Serve this worldbook" for e in at.expander)
    tools = next(df.value for df in at.dataframe if "tool" in df.value.columns)
    assert list(tools["tool"]) == [tool.name for tool in book_tools(book)]
    assert tools.set_index("tool").loc["tail", "arguments"] == "file_name: string, lines: integer"
    codes = [code.value for code in at.code]
    stdio = next(code for code in codes if code.endswith("--mcp"))
    assert shlex.split(stdio) == ["worldsmith", "serve", "bfcl", "--workspace", str(empty_root), "--mcp"]
    config = json.loads(next(code for code in codes if code.startswith("{")))
    entry = config["mcpServers"]["worldsmith-bfcl"]
    assert [entry["command"], *entry["args"]] == shlex.split(stdio)
    assert any("--transport http" in code and "/mcp" in code for code in codes)
    assert any("--http --host 127.0.0.1 --port 8766" in code for code in codes)
    assert any("HttpEnv('http://127.0.0.1:8766')" in code for code in codes)
