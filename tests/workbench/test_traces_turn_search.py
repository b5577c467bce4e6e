"""The Traces page's "Search all turns": ranked hits from the index, hostile snippets escaped, a hit opens its turn."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import TRACES_PAGE

from workbench.traces.turn_search import snippet_markdown
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.workspace import Workspace


def test_search_all_turns_opens_the_turn(empty_root: Path) -> None:
    episodes = [Episode(id=f"ep-{n}", env_id="shop", task=f"task {n}", turns=[
        Turn(index=i, action=Action(name="open", arguments={"box": f"box{n}-{i}"}),
             observation=Observation(text=f"**bold** [x](javascript:alert) crate{n}{i}")) for i in range(3)])
        for n in range(4)]
    Workspace(empty_root).add_episodes("d", episodes)
    at = AppTest.from_file(str(TRACES_PAGE), default_timeout=60)
    at.query_params["dataset"] = "d"
    at.run()
    assert not at.exception
    at.text_input(key="tr_turn_fts").input("crate21").run()
    assert not at.exception
    assert any("1 turns (index, best first)" in c.value for c in at.caption)
    shown = [m.value for m in at.markdown if "crate21" in m.value]
    assert shown and "\\*\\*bold\\*\\*" in shown[0] and "](javascript" not in shown[0]
    at.button(key="tr_fts_ep-2#1").click().run()
    assert not at.exception
    assert at.session_state["tr_linked_turn"] == "ep-2#1"


def test_snippet_markdown_escapes_and_bolds() -> None:
    assert snippet_markdown("a_b \x02<hit>\x03 c") == "a\\_b **\\<hit\\>** c"
