"""The Evaluate page's Launch tab on a tool-API dataset with a train split: without a model of its own it says the
bundled model was trained on other text and offers to train one (a real background `worldsmith llm train-tiny`,
its progress on the page); with one, that model is the default of the dataset's model-backed methods."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

from worldsmith.llm.spec import MODEL_ENV_VAR

PAGE = REPO / "pages" / "evaluate.py"
TOOLSHOP = REPO / "data_samples" / "toolshop" / "expert.jsonl"
OFFER = "Train tiny\\-shop on shop's train split"  # as the button's Markdown label escapes it


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_launch_tab(methods: list[str] | None = None) -> AppTest:
    """The Launch tab, with `methods` chosen in the form (as after a launch with them)."""
    at = AppTest.from_file(str(APP), default_timeout=120).run()
    no_exception(at.switch_page(str(PAGE)).run())
    at.session_state["ev_tab"] = "Launch"
    if methods is not None:
        at.session_state["ev_new_methods"] = methods
    return no_exception(at.run())


@pytest.fixture
def shop(empty_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Dataset `shop` (the toolshop expert runs) split train/test, and worldbook `shop` built on train."""
    from worldsmith import Workspace
    from worldsmith.sim.route_learning import build_simulator_book
    from worldsmith.workspace.splits import assign_splits
    from worldsmith.worldbook import WorldbookStore

    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)
    workspace = Workspace(empty_root)
    assert workspace.ingest([TOOLSHOP], "shop").committed
    dataset = workspace.dataset("shop")
    assign_splits(dataset, {"train": 0.7, "test": 0.3})
    book = build_simulator_book(list(dataset.iter_episodes("train")), name="shop").book
    WorldbookStore(empty_root / "worldbooks").save(book, sources=[{"dataset": "shop", "split": "train"}])
    return empty_root


@pytest.mark.integration
def test_without_its_own_model_the_page_warns_and_trains_one_in_the_background(shop: Path) -> None:
    from worldsmith.llm import indomain
    from worldsmith.util.jobs import JobFolder, stop

    quiet = open_launch_tab()  # harness and nearest (the default) use no model: nothing to say
    assert not any("ALFWorld" in str(w.value) for w in quiet.warning) and OFFER not in [b.label for b in quiet.button]
    at = open_launch_tab(["harness", "direct"])
    warned = [str(w.value) for w in at.warning]
    assert any("not trained on this data" in w and "ALFWorld" in w and "train split" in w for w in warned), warned
    assert OFFER in [b.label for b in at.button]
    no_exception(at.button[[b.label for b in at.button].index(OFFER)].click().run())
    assert any("Training started" in str(s.value) for s in at.success)
    job = JobFolder(shop / "models" / ".jobs", kind="train-tiny").load("tiny-shop")
    assert job is not None
    assert job.command[job.command.index("--split") + 1] == "train"
    assert job.command[job.command.index("--out") + 1] == str(indomain.in_domain_dir(shop, "shop"))
    assert job.command[job.command.index("--roles") + 1] == "environment"
    try:
        deadline = time.monotonic() + 120  # tokenizing, then the first steps
        while (status := indomain.training_status(shop, "shop")) is not None and status.step < 1:
            assert status.state == "running", status.log_tail
            assert time.monotonic() < deadline, status.log_tail
            time.sleep(0.5)
        at = no_exception(at.run())
        bars = [bar.proto.text for bar in at.get("progress")]
        assert any("training `tiny-shop`: step" in text for text in bars), bars
        assert OFFER not in [b.label for b in at.button]  # one run at a time
    finally:
        stop(job, grace_s=5.0)


def test_its_own_model_is_the_default_of_model_backed_methods(shop: Path) -> None:
    import json

    from worldsmith.llm import indomain
    from worldsmith.llm.tiny import REPORT_FILE

    folder = indomain.in_domain_dir(shop, "shop")
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / REPORT_FILE).write_text(json.dumps({"trained_on": {"dataset": "shop", "split": "train",
                                                                 "episodes": 21}}), encoding="utf-8")
    at = open_launch_tab(["direct"])
    said = [str(c.value) for c in at.caption]
    assert any("Model-backed methods on `shop` use `tiny:" in c and "trained on dataset shop, split train" in c
               and "21 episodes" in c for c in said), said
    assert OFFER not in [b.label for b in at.button] and not any("ALFWorld" in str(w.value) for w in at.warning)
