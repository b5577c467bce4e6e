"""The Home page lists the workspace's datasets, worldbooks, latest evaluation runs and the jobs running now
(issue 46), each linked to the page that shows it."""

from __future__ import annotations

import sys
from pathlib import Path

from eval_fixtures import write_run
from streamlit.testing.v1 import AppTest
from workbench_support import APP, HOME_PAGE, shown

from helpers import sample_episodes
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.util.jobs import stop
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore
from worldsmith.worldbook.build_jobs import build_jobs


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def home() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    return no_exception(at.switch_page(str(HOME_PAGE)).run())


def test_home_lists_datasets_books_runs_and_running_jobs(empty_root: Path, openai_file: Path) -> None:
    Workspace(empty_root).ingest([openai_file], "chat")
    book = build_simulator_book(sample_episodes("bfcl"), name="bfcl").book
    WorldbookStore(empty_root / "worldbooks").save(book, message="first build")
    write_run(empty_root, "run-a", ["harness", "copy-last"])
    job = build_jobs(empty_root).start("shop", [sys.executable, "-c", "import time; time.sleep(60)"],
                                       workspace=empty_root)
    try:
        at = home()
        headers = [h.value for h in at.subheader]
        assert headers == ["Running jobs (1)", "Datasets (1)", "Worldbooks (1)", "Evaluation runs (1)"]
        links = {link.label: link for link in at.main.get("page_link")}
        assert any(label.startswith("Building shop: 0%") for label in links), list(links)
        # static tables (cheaper in the browser than data grids), their text escaped: `st.table` renders Markdown
        books, runs = (table.value.map(lambda v: shown(v) if isinstance(v, str) else v).rename(index=shown)
                       for table in at.table)
        row = books.loc["bfcl"]
        assert row["environment"] == (book.env_id or "") and row["rules"] == len(book.rules) + len(book.tool_rules)
        assert row["message"] == "first build" and row["version"].startswith("v0001")
        assert links["bfcl"].proto.query_string == "book=bfcl"
        assert list(runs.index) == ["run-a"] and runs["state"].iloc[0] == "complete"
        assert set(runs["methods"].iloc[0].split(", ")) == {"harness", "copy-last"}
    finally:
        stop(job, grace_s=1.0)
    at = home()
    assert at.subheader[0].value == "Running jobs (0)" and any("Nothing is running" in c.value for c in at.caption)


def test_an_empty_workspace_says_where_to_start(empty_root: Path) -> None:
    at = home()
    assert [h.value for h in at.subheader] == ["Running jobs (0)", "Datasets (0)", "Worldbooks (0)",
                                               "Evaluation runs (0)"]
    assert any("Build page" in c.value for c in at.caption) and any("Evaluate page" in c.value for c in at.caption)
