"""The Evaluate page's Consistency tab under AppTest: a check run on a real toolshop book, stored, and shown per
invariant and per tool, with the chosen evaluation run's per-tool exact match beside."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from eval_fixtures import write_run
from streamlit.testing.v1 import AppTest
from toolshop_support import toolshop_book
from workbench_support import APP, REPO

from workbench.evaluate.consistency import fidelity_by_tool, list_reports, tool_frame
from worldsmith.worldbook import WorldbookStore

PAGE = REPO / "pages" / "evaluate.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def frame_with(at: AppTest, column: str) -> pd.DataFrame:
    return next(df.value for df in at.dataframe if column in df.value.columns)


def test_fidelity_by_tool_is_the_methods_mean_exact_match_per_action_name() -> None:
    records = pd.DataFrame({"method": ["harness", "harness", "harness", "nearest"],
                            "action": ['{"name": "get_order", "arguments": {}}', "get_order x", "cancel_order y",
                                       "get_order z"],
                            "exact_match": [1.0, 0.0, 1.0, 0.0]})
    assert fidelity_by_tool(records, "harness") == {"get_order": 0.5, "cancel_order": 1.0}
    assert fidelity_by_tool(records, "direct") == {} and fidelity_by_tool(pd.DataFrame(), "harness") == {}


@pytest.mark.slow
def test_a_check_runs_is_stored_and_shown_per_tool(empty_root: Path) -> None:
    book = toolshop_book()
    WorldbookStore(empty_root / "worldbooks").save(book)
    write_run(empty_root, "next-a", ["harness", "nearest"])
    at = AppTest.from_file(str(APP), default_timeout=300).run()
    no_exception(at.switch_page(str(PAGE)).run())
    at.session_state["ev_tab"] = "Consistency"
    no_exception(at.run())
    assert any("No consistency checks yet" in str(info.value) for info in at.info)
    at.selectbox(key="cons_method").set_value("nearest")
    at.number_input(key="cons_sessions").set_value(3)
    no_exception(at.button[0].click().run())

    [(path, report, error)] = list_reports(empty_root)
    assert report is not None and not error and report.method == "nearest" and report.sessions == 3
    assert report.book == book.name and report.book_version == WorldbookStore(empty_root / "worldbooks").head(book.name)
    invariants = frame_with(at, "what it asks").set_index("invariant")
    assert int(invariants.loc["spelling", "checks"]) == report.invariants["spelling"].checks > 0
    tools = frame_with(at, "role").set_index("tool")
    assert list(tools.index) == sorted(report.tools) and "exact match (eval run)" in tools.columns
    assert list(tool_frame(report).columns[:2]) == ["tool", "role"]
    if report.examples:
        assert frame_with(at, "answers")["invariant"].notna().all()
