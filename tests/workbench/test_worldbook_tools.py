"""The Worldbook page's Search and Export / import tabs under AppTest (real MiniLM index, real packages)."""

from __future__ import annotations

from pathlib import Path

import orjson
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, show_tab

from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces import Episode
from worldsmith.worldbook import WorldbookStore

PAGE = REPO / "pages" / "worldbook.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def _save_book(root: Path) -> WorldbookStore:
    lines = (REPO / "data_samples" / "collected" / "alfworld.jsonl").read_bytes().splitlines()
    episodes = [Episode.model_validate({k: v for k, v in orjson.loads(line).items() if k != "format"})
                for line in lines]
    store = WorldbookStore(root / "worldbooks")
    store.save(build_simulator_book(episodes, name="alfworld").book, sources=[{"dataset": "samples"}])
    return store


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=180).run()
    return no_exception(at.switch_page(str(PAGE)).run())


def test_search_finds_rules_by_words_and_by_meaning(empty_root: Path) -> None:
    _save_book(empty_root)
    at = show_tab(open_page(), "Search")
    at.selectbox(key="wb_search_mode").set_value("lexical")
    no_exception(at.text_input(key="wb_search_query").input("heat").run())
    table = next(df.value for df in at.dataframe if "score" in df.value.columns)
    assert any(i.startswith("heat") for i in table["id"])
    at.selectbox(key="wb_search_mode").set_value("dense")
    at.multiselect(key="wb_search_kinds").set_value(["rule"])
    no_exception(at.text_input(key="wb_search_query").input("pick up an object").run())
    table = next(df.value for df in at.dataframe if "score" in df.value.columns)
    assert table["id"].iloc[0].startswith("take") and set(table["kind"]) == {"rule"}


def test_export_then_import_as_a_new_worldbook(empty_root: Path, tmp_path: Path) -> None:
    store = _save_book(empty_root)
    at = show_tab(open_page(), "Export / import")
    package = tmp_path / "pkg"
    at.text_input(key="wb_export_dir").input(str(package))
    no_exception(at.button(key="wb_export").click().run())
    assert (package / "rules" / "index.jsonl").exists() and (package / "manifest.json").exists()
    no_exception(at.button(key="wb_export").click().run())  # a non-empty folder is refused, said on the page
    assert at.error, "exporting over a non-empty folder should be refused"
    at.text_input(key="wb_import_dir").input(str(package))
    at.text_input(key="wb_import_name").input("copy")
    no_exception(at.button(key="wb_import").click().run())
    assert store.names() == ["alfworld", "copy"]
    assert store.load("copy").rules == store.load("alfworld").rules


def test_a_rule_link_opens_the_rule(empty_root: Path) -> None:
    _save_book(empty_root)
    at = AppTest.from_file(str(APP), default_timeout=180).run()
    at.query_params["book"] = "alfworld"
    at.query_params["rule"] = "take.r1"
    no_exception(at.switch_page(str(PAGE)).run())
    assert at.selectbox(key="wb_rule").value == "take.r1"
    at.query_params["rule"] = "no-such-rule"
    no_exception(at.run())
