"""The Build page under AppTest: build from a dataset with cross-fitting, see the report, find the new version.

A build runs as a background job: the tests click Build, wait for the job, and rerun the page (as a person coming
back to it would).
"""

from __future__ import annotations

import time
from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore
from worldsmith.worldbook.book_stages import STAGES

PAGE = REPO / "pages" / "build.py"
SAMPLE = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    return no_exception(at.switch_page(str(PAGE)).run())


def wait_for_build(at: AppTest, root: Path, book: str) -> AppTest:
    """Rerun the page once the background build of `book` has ended."""
    from worldsmith.worldbook.build_jobs import build_status

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        status = build_status(root, book)
        if status is not None and status.state != "running":
            return no_exception(at.run())
        time.sleep(0.2)
    raise AssertionError(f"the build of {book} still runs after 300 s")


def build(at: AppTest, root: Path, book: str) -> AppTest:
    no_exception(at.button[0].click().run())
    return wait_for_build(at, root, book)


def test_no_dataset_says_what_to_do(empty_root: Path) -> None:
    at = open_page()
    assert any("No datasets yet" in str(i.value) for i in at.info)
    links = {link.label: link.page for link in at.get("page_link")}
    assert links["Import traces"] == "traces" and links["Collect episodes"] == "collect"


def test_environment_and_split_follow_the_chosen_dataset_and_a_mix_warns(empty_root: Path) -> None:
    workspace = Workspace(empty_root)
    workspace.ingest([SAMPLE], "alf")
    workspace.split("alf", {"train": 0.75, "test": 0.25}, seed=0)
    workspace.ingest([SAMPLE, SAMPLE.parent / "textworld.jsonl"], "mixed")
    at = open_page()
    no_exception(at.selectbox(key="build_dataset").set_value("alf").run())
    assert at.selectbox(key="build_env").options == ["(all)", "alfworld"]
    assert at.text_input(key="build_out").value == "alfworld"
    assert at.selectbox(key="build_split").options == ["(all)", "test", "train"]
    assert at.selectbox(key="build_split").value == "train", "leak-safe: test stays held out unless chosen"
    assert not at.warning
    no_exception(at.selectbox(key="build_dataset").set_value("mixed").run())
    assert at.selectbox(key="build_env").options == ["(all)", "alfworld", "textworld"]
    assert at.selectbox(key="build_split").options == ["(all)"]
    assert at.text_input(key="build_out").value == "worldbook", "the name follows the dataset, not the last one's env"
    assert any("mixes 2 environments" in str(w.value) for w in at.warning)
    build(at, empty_root, "worldbook")
    assert any("Built with a warning" in str(w.value) and "mix 2 environments" in str(w.value) for w in at.warning)


def test_build_with_cross_fitting_saves_a_version_and_shows_the_report(empty_root: Path) -> None:
    Workspace(empty_root).ingest([SAMPLE], "alf")
    at = open_page()
    assert at.selectbox(key="build_env").options == ["(all)", "alfworld"]
    at.text_input(key="build_out").input("kitchen")
    no_exception(at.button[0].click().run())
    # leave for another page and come back: the build went on in the background, and the page shows it
    no_exception(at.switch_page(str(REPO / "pages" / "traces.py")).run())
    no_exception(at.switch_page(str(PAGE)).run())
    assert (any("**Building `kitchen`** in the background" in str(m.value) for m in at.markdown)
            or any("Saved `kitchen`" in str(s.value) for s in at.success)), (
        [e.value for e in at.error], [m.value for m in at.markdown])
    wait_for_build(at, empty_root, "kitchen")
    store = WorldbookStore(empty_root / "worldbooks")
    assert store.names() == ["kitchen"]
    info = store.info("kitchen", store.head("kitchen"))
    assert info.author == "workbench" and info.validation["status"] == "validated"
    assert any("Saved `kitchen`" in str(s.value) for s in at.success)
    assert any(m.label == "Coverage" for m in at.metric)
    table = next(df.value for df in at.dataframe if "exact match" in df.value.columns)
    assert {"go", "take", "put"} <= set(table["action"])
    stages = next(df.value for df in at.dataframe if "seconds" in df.value.columns)
    assert list(stages["stage"]) == [*STAGES[:-1], "routes", "compile"] and (stages["seconds"] >= 0).all()
    assert store.load("kitchen").routes is not None
    crossed = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    version = store.head("kitchen")
    assert any(c.startswith("Produced by: method worldbook rule replay, ") and "-fold cross-fitting by family · "
               "model none · dataset alf · split all · n " in c and f" turns · run kitchen@{version}" in c
               for c in crossed), crossed


def test_a_typed_name_is_kept_when_the_dataset_changes(empty_root: Path) -> None:
    workspace = Workspace(empty_root)
    workspace.ingest([SAMPLE], "alf")
    workspace.ingest([SAMPLE, SAMPLE.parent / "textworld.jsonl"], "mixed")
    at = open_page()
    no_exception(at.selectbox(key="build_dataset").set_value("alf").run())
    at.text_input(key="build_out").input("kitchen")
    at.number_input(key="build_route_folds").set_value(0)
    at.number_input(key="build_folds").set_value(0)
    build(at, empty_root, "kitchen")  # a name is the form's once it is submitted
    no_exception(at.selectbox(key="build_dataset").set_value("mixed").run())
    assert at.text_input(key="build_out").value == "kitchen"


def test_route_table_folds_zero_builds_the_book_without_routes(empty_root: Path) -> None:
    Workspace(empty_root).ingest([SAMPLE], "alf")
    at = open_page()
    at.text_input(key="build_out").input("plain")
    at.number_input(key="build_route_folds").set_value(0)
    at.number_input(key="build_folds").set_value(0)
    build(at, empty_root, "plain")
    assert WorldbookStore(empty_root / "worldbooks").load("plain").routes is None
    stages = next(df.value for df in at.dataframe if "seconds" in df.value.columns)
    assert list(stages["stage"]) == list(STAGES)


def test_a_bad_name_is_refused_before_build_and_nothing_saved(empty_root: Path) -> None:
    Workspace(empty_root).ingest([SAMPLE], "alf")
    at = open_page()
    no_exception(at.text_input(key="build_out").input("bad name!").run())
    assert any("worldbook name" in str(e.value) and "letters, digits" in str(e.value) for e in at.error), "said first"
    assert at.button(key="build_run").disabled
    assert WorldbookStore(empty_root / "worldbooks").names() == []


def test_first_start_on_the_bundled_samples_builds_an_alfworld_worldbook(monkeypatch, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    monkeypatch.setenv("WORLDSMITH_WORKSPACE", str(root))
    monkeypatch.setenv("WORLDSMITH_SAMPLES", str(REPO / "data_samples"))
    no_exception(AppTest.from_file(str(APP), default_timeout=300).run())
    store = WorldbookStore(root / "worldbooks")
    assert store.names() == ["alfworld"]
    book = store.load("alfworld")
    assert {r.action for r in book.supported_rules()} >= {"go", "take", "put"}
    assert store.info("alfworld", store.head("alfworld")).validation["status"] == "validated"


def test_the_leakage_table_names_each_leaked_trajectory_and_why() -> None:
    from helpers import sample_episodes
    from workbench.worldbook.build_report import leakage_frame
    from worldsmith.worldbook.build import leakage_check

    episodes = sample_episodes("alfworld_expert")[:3]
    copy = episodes[1].model_copy(update={"id": "copied-run", "task_id": "another-task"})
    report = leakage_check(episodes[:2], [episodes[0], copy, episodes[2]])
    assert not report.ok
    frame = leakage_frame(report)
    why = dict(zip(frame["episode"], frame["why"], strict=False))
    assert why[episodes[0].id] == "in the construction episodes; target turns in the construction episodes"
    assert why["copied-run"] == ("target turns in the construction episodes; "  # the copy kept its turn ids
                                 f"a copy of {episodes[1].id} in the construction episodes")
    assert episodes[2].id not in why


def _old_leaky_build_report() -> None:
    """A build outcome stored before LeakageReport: the builder's leaked episodes as a list of ids."""
    import json

    from workbench_support import REPO

    from workbench.worldbook.build_report import render_leakage

    leakage = json.loads((REPO / "tests" / "fixtures" / "leakage" / "build_leaked_v1.json").read_text())
    render_leakage({"validation_split": "test", "leakage": leakage})


def test_an_old_stored_build_outcome_shows_its_leaked_trajectories() -> None:
    at = no_exception(AppTest.from_function(_old_leaky_build_report, default_timeout=60).run())
    assert any("leakage check FAILED" in str(c.value) for c in at.caption)
    assert any(str(w.value).startswith("2 held-out trajectories also stand in the construction episodes")
               for w in at.warning)
    frame = at.dataframe[0].value
    assert list(frame["episode"])[-1] == "copied-run" and frame["why"].str.contains("construction episodes").all()


def _stored_report_with_demotions_and_held_out() -> None:
    from unittest import mock

    import streamlit as st

    from workbench.worldbook.build_report import render_build_report

    with mock.patch.object(st, "page_link"):  # outside the app: no Worldbook page to link to
        render_build_report({
            "book": "shop", "version": "v3", "parent": "v2", "rules": 2, "episodes": 9, "dataset": "tickets",
            "split": "train", "validation_split": "test", "statuses": {"supported": 1, "tentative": 1},
            "demoted": [{"rule": "calculate.r1", "kind": "rule", "families": 4, "held_out_answered": 10,
                         "held_out_exact": 1, "reasons": ["held out it was exact on 1/10 turns it answered"]}],
            "validation": {"totals": {"turns": 42, "coverage": 0.5, "coverage_verified": 0.4, "exact_match": 0.3},
                           "common_actions": {"actions": ["pay"], "coverage": 0.5, "exact_match": 0.3},
                           "per_action": {"pay": {"turns": 42, "covered_rate": 0.5, "verified_rate": 0.4,
                                                  "exact_rate": 0.3}}},
            "timings_s": {}, "stages": {}})


def test_the_build_report_says_what_produced_its_held_out_numbers() -> None:
    at = no_exception(AppTest.from_function(_stored_report_with_demotions_and_held_out, default_timeout=60).run())
    sources = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    assert ("Produced by: method route table cross-fitting (the book's harness route stage) · model unknown · "
            "dataset tickets · split train · n unknown · run shop@v3") in sources, sources
    assert ("Produced by: method worldbook rule replay · model none · dataset tickets · split test · n 42 turns · "
            "run shop@v3") in sources, sources


def test_a_running_build_is_linked_from_every_page(empty_root: Path) -> None:
    import sys

    from worldsmith.util.jobs import stop
    from worldsmith.worldbook.build_jobs import build_jobs

    job = build_jobs(empty_root).start("shop", [sys.executable, "-c", "import time; time.sleep(60)"],
                                       workspace=empty_root)
    try:
        at = no_exception(AppTest.from_file(str(APP), default_timeout=120).run())
        labels = [link.label for link in at.sidebar.get("page_link")]
        assert "Building shop: 0%" in labels, labels
        at = no_exception(at.switch_page(str(REPO / "pages" / "traces.py")).run())
        assert "Building shop: 0%" in [link.label for link in at.sidebar.get("page_link")]
    finally:
        stop(job, grace_s=1.0)


def test_the_demotion_table_lists_each_rule_its_families_held_out_and_why() -> None:
    from workbench.worldbook.build_report import demotion_frame

    frame = demotion_frame({"demoted": [
        {"rule": "calculate.r1", "kind": "rule", "families": 4, "held_out_answered": 100, "held_out_exact": 1,
         "reasons": ["held out it was exact on 1/100 turns it answered"], "literals": []},
        {"rule": "precondition:pay:1", "kind": "tool_rule", "families": 1, "held_out_answered": None,
         "held_out_exact": None, "reasons": ["its support spans 1 trajectory family", "a literal"], "literals": ["12.5"]}]})
    assert list(frame["rule"]) == ["calculate.r1", "precondition:pay:1"]
    assert list(frame["held-out exact"]) == ["1/100", "not measured"] and list(frame["families"]) == [4, 1]
    assert frame["why"][1] == "its support spans 1 trajectory family; a literal"
