"""The Evaluate page launching a real `worldsmith eval` (nearest and the harness on one held-out ALFWorld episode)
as a detached background job: its progress shows on the page, and the finished run appears in the run list."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, press_launch

PAGE = REPO / "pages" / "evaluate.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    """The page on its Launch tab (only the open tab is drawn), as a click on the tab opens it."""
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    no_exception(at.switch_page(str(PAGE)).run())
    at.session_state["ev_tab"] = "Launch"
    return no_exception(at.run())


@pytest.fixture
def eval_workspace(empty_root: Path) -> Path:
    """Dataset `alfworld` (the 36 expert ALFWorld games, split train/test by family) and a worldbook built on train."""
    from worldsmith import Workspace
    from worldsmith.sim.route_learning import build_simulator_book
    from worldsmith.workspace.splits import assign_splits
    from worldsmith.worldbook import WorldbookStore

    workspace = Workspace(empty_root)
    assert workspace.ingest([REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"], "alfworld").committed
    dataset = workspace.dataset("alfworld")
    assign_splits(dataset, {"train": 0.8, "test": 0.2})
    book = build_simulator_book(list(dataset.iter_episodes("train")), name="alfworld").book
    WorldbookStore(empty_root / "worldbooks").save(book)
    return empty_root


def _wait_for_job(root: Path, run: str):
    from workbench.evaluate.jobs import job_status

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = job_status(root, run)
        if status is not None and status.state != "running":
            return status
        time.sleep(0.2)
    raise AssertionError(f"run {run} still running after 300 s")


@pytest.mark.integration
def test_launch_runs_worldsmith_eval_in_the_background_with_progress(eval_workspace: Path) -> None:
    at = open_page()
    assert any("No evaluation runs" in str(i.value) for i in at.info)
    at.text_input(key="ev_new_run").input("tiny")
    at.selectbox(key="ev_new_book").set_value("alfworld")
    at.selectbox(key="ev_new_dataset").set_value("alfworld")
    at.text_input(key="ev_new_split").input("test")
    at.multiselect(key="ev_new_methods").set_value(["nearest", "harness"])
    at.number_input(key="ev_new_episodes").set_value(1)
    at.number_input(key="ev_new_turns").set_value(2)
    no_exception(press_launch(at))
    assert any("Started run" in str(s.value) and "--max-episodes 1" in str(s.value) for s in at.success)
    bars = [bar.proto.text for bar in at.get("progress")]
    assert any("tiny" in text for text in bars), bars

    status = _wait_for_job(eval_workspace, "tiny")
    assert status.state == "finished", (status.returncode, status.log_tail)
    assert status.result is not None and status.result["records"] == 8  # 2 protocols x 2 methods x 1 ep. x 2 turns
    assert status.result["protocols"] == ["drift", "next-obs"]  # the form's default: both
    at.session_state["ev_tab"] = "Results"  # the user goes to see it
    at = no_exception(at.run())
    assert any(
        "tiny" in text and "finished" in text and "4/4" in text
        for text in (bar.proto.text for bar in at.get("progress"))
    )
    assert at.selectbox(key="ev_run").value == "tiny"
    board = next(df.value for df in at.dataframe if "exact_match" in df.value.columns).set_index("method")
    assert set(board.index) == {"harness", "nearest"} and set(board["n"]) == {2}
    assert (eval_workspace / "runs" / "eval" / "tiny" / "records.parquet").is_file()


@pytest.mark.integration
def test_the_first_evaluation_on_a_fresh_workspace_runs_on_the_held_out_split(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """First start imports the bundled samples, splits them and builds `alfworld` on train: the form's defaults
    (the book's dataset, split test, environment alfworld) evaluate without a leakage refusal."""
    from worldsmith import Workspace
    from worldsmith.worldbook import WorldbookStore
    from worldsmith.worldbook.leakage import check_leakage

    root = tmp_path / "fresh"
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", str(REPO / "data_samples"))
    at = open_page()
    dataset = Workspace(root).dataset("samples")
    assert set(dataset.splits()) == {"train", "validation", "test"}
    store = WorldbookStore(root / "worldbooks")
    book = store.load("alfworld")
    held = [e for e in dataset.iter_episodes("test") if (e.env_id or "").startswith("alfworld")]
    assert held and check_leakage(book, held, raise_on_leak=False).ok
    assert store.info("alfworld", store.head("alfworld")).sources[0]["split"] == "train"
    assert at.selectbox(key="ev_new_book").value == "alfworld" and at.selectbox(key="ev_new_dataset").value == "samples"
    assert at.text_input(key="ev_new_split").value == "test" and at.text_input(key="ev_new_env").value == "alfworld"
    at.text_input(key="ev_new_run").input("first")
    no_exception(press_launch(at))
    status = _wait_for_job(root, "first")
    assert status.state == "finished", (status.returncode, status.log_tail)
    assert status.result is not None and status.result["leakage"]["ok"]
    at.session_state["ev_tab"] = "Results"
    at = no_exception(at.run())
    assert at.selectbox(key="ev_run").value == "first"
    board = next(df.value for df in at.dataframe if "exact_match" in df.value.columns).set_index("method")
    assert set(board.index) == {"harness", "nearest"}
    few = len(held)  # fewer than 10 held-out games: every interval says so beside the number
    assert board.loc["harness", "exact_match"].endswith(f"(only {few} trajectories)")
    assert any("Small sample" in str(w.value) for w in at.warning)


def test_a_bad_spec_is_refused_in_the_form_and_a_failed_run_shows_its_error(eval_workspace: Path) -> None:
    at = open_page()
    at.text_input(key="ev_new_run").input("broken")
    methods = at.multiselect(key="ev_new_methods").value
    at.multiselect(key="ev_new_methods").set_value([*methods, "direct"])  # a method that uses the model
    no_exception(at.text_input(key="ev_new_llm").input("tiny:no/such/folder").run())
    refused = [str(e.value) for e in at.error]  # said as it is typed: Launch cannot start it
    assert any("Model spec" in e and "no model folder at" in e and "no/such/folder" in e for e in refused), refused
    assert at.button(key="ev_launch").disabled
    assert not (eval_workspace / "runs" / "eval" / ".jobs" / "broken.json").exists()  # nothing was started

    at.multiselect(key="ev_new_methods").set_value(methods)
    at.text_input(key="ev_new_llm").input("")
    no_exception(at.text_input(key="ev_new_split").input("nosuch").run())
    no_exception(at.button(key="ev_launch").click().run())
    status = _wait_for_job(eval_workspace, "broken")
    assert status.state == "failed" and status.returncode not in (None, 0)
    at = no_exception(at.run())
    shown = [str(e.value) for e in at.error]
    assert any("Run `broken` failed" in e and "nosuch" in e for e in shown), shown
    # no full bar over "No evaluation runs yet": a run that failed before any unit shows its error, not "done"
    assert not [bar.proto.text for bar in at.get("progress") if "broken" in bar.proto.text]
    assert any("launch of `broken` failed" in str(i.value) for i in at.info)
    assert not at.expander or all("background" not in e.label.lower() for e in at.expander)  # not tucked away


def test_the_environment_follows_the_chosen_worldbook_and_dataset(empty_root: Path, tmp_path: Path) -> None:
    """Never a fixed "alfworld": the environment comes from the pair chosen, by id or by the actions it calls."""
    from toolshop_support import toolshop_workspace

    from helpers import toolshop_files
    from worldsmith import Workspace

    toolshop_workspace(empty_root)  # dataset `shop` (env toolshop) and worldbook `shop` built on it
    workspace = Workspace(empty_root)
    assert workspace.ingest([REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"], "alfworld").committed
    # the same API under another id (without it, the logs would join `toolshop`, whose tools and prompt they match)
    workspace.ingest(list(toolshop_files(tmp_path, declared=False)), "chats", env="chats-api")
    at = open_page()
    assert at.selectbox(key="ev_new_book").value == "shop" and at.selectbox(key="ev_new_dataset").value == "shop"
    assert at.text_input(key="ev_new_env").value == "toolshop" and not at.warning

    no_exception(at.selectbox(key="ev_new_dataset").set_value("alfworld").run())
    assert at.text_input(key="ev_new_env").value == ""  # every environment: none of them is the book's
    assert any("None of them calls the book's actions" in str(w.value) for w in at.warning)

    no_exception(at.selectbox(key="ev_new_dataset").set_value("chats").run())
    assert at.text_input(key="ev_new_env").value == "chats-api"  # the same API under another id
    warning = next(str(w.value) for w in at.warning)
    assert "relabel chats" in warning and "Relabel it" in warning
