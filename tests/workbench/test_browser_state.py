"""A research session's state stays, its defaults do not leak, its jobs can be steered: in real Chromium on the
workspace a first start makes (dataset `samples` split train/validation/test, worldbook `alfworld` built on train).

Each page is left and found again three ways: by the sidebar, by browser Back and by a reload."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest
from browser_support import WAIT_MS, choose_option, require_browser, streamlit_server, widget_class

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    from workbench.common.bootstrap import import_samples
    from workbench.common.paths import samples_dir
    from worldsmith.workspace import Workspace

    require_browser()
    workspace = tmp_path_factory.mktemp("state-ws")
    assert import_samples(Workspace(workspace), samples_dir())["worldbook"]
    log = tmp_path_factory.mktemp("state-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": "", "WORLDSMITH_MODEL": ""}) as url:
        yield {"url": url, "workspace": workspace, "log": log}


def _open(page, server: dict, path: str, heading: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/{path}")
    expect(page.get_by_role("heading", name=heading)).to_be_visible()


def _sidebar(page, title: str, heading: str | None = None) -> None:
    from playwright.sync_api import expect

    page.get_by_test_id("stSidebarNavItems").get_by_role("link", name=title, exact=True).click()
    expect(page.get_by_role("heading", name=heading or title, exact=True)).to_be_visible()


def _href(page) -> str:
    return page.evaluate("window.location.href")


def _wait_for_href(page, fragment: str) -> None:
    deadline = time.monotonic() + WAIT_MS / 1000
    while fragment not in _href(page):
        if time.monotonic() > deadline:
            raise AssertionError(f"{fragment!r} never appeared in the address bar: {_href(page)}")
        time.sleep(0.2)


def _away_and_back(page, title: str, heading: str, check) -> None:
    """Leave the page and come back by the sidebar, then reload it, then leave it and come back by Back; `check()`
    finds its state each time."""
    from playwright.sync_api import expect

    _sidebar(page, "Traces")
    _sidebar(page, title, heading)
    check()
    page.reload()
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    check()
    _sidebar(page, "Plug-ins")  # a page that writes no address of its own: Back returns to this one
    page.go_back()
    expect(page.get_by_role("heading", name=heading, exact=True)).to_be_visible()
    check()


def _combobox(page, key: str):
    return page.locator(widget_class(key)).get_by_role("combobox")


def test_worldbook_keeps_its_held_out_split_and_tab(page, server: dict) -> None:
    from playwright.sync_api import expect

    _open(page, server, "worldbook", "Worldbook")
    choose_option(page, "wb_heldout_split", "test")
    expect(page.get_by_text("This is the book's first version")).to_be_visible()
    page.get_by_role("tab", name="Notes").click()
    expect(page.get_by_role("button", name="Add note")).to_be_visible()
    _wait_for_href(page, "heldout_split=test")

    def check() -> None:
        expect(_combobox(page, "wb_heldout_split")).to_have_value("test")
        expect(page.get_by_role("tab", name="Notes")).to_have_attribute("aria-selected", "true")

    _away_and_back(page, "Worldbook", "Worldbook", check)


def test_side_by_side_opens_on_the_test_split_and_keeps_its_episode_and_step(page, server: dict) -> None:
    from playwright.sync_api import expect

    _open(page, server, "simulate?sim_view=Side+by+side&sbs_methods=harness", "Simulate")  # kept state: an address
    expect(_combobox(page, "sbs_split")).to_have_value("test")  # leak-safe: an episode the book never saw
    expect(page.get_by_text("Leaked:")).to_have_count(0)
    episode = _combobox(page, "sbs_episode").input_value()
    page.get_by_role("button", name="Step", exact=True).click()
    expect(page.get_by_text("1 steps of")).to_be_visible()
    page.get_by_role("button", name="Step", exact=True).click()
    expect(page.get_by_text("2 steps of")).to_be_visible()
    _wait_for_href(page, "sbs_at=2")

    def check() -> None:
        expect(page.get_by_text("2 steps of")).to_be_visible()
        expect(_combobox(page, "sbs_episode")).to_have_value(episode)

    _away_and_back(page, "Simulate", "Simulate", check)
    choose_option(page, "sbs_split", "train")  # a leaked choice stays possible, named as leaked
    search = page.locator(widget_class("sbs_search")).get_by_role("textbox")
    search.fill("alfworld")
    search.press("Enter")
    expect(page.get_by_text("Leaked:")).to_be_visible()


def test_evaluate_keeps_its_launch_settings_and_checks_them_before_launch(page, server: dict) -> None:
    from playwright.sync_api import expect

    _open(page, server, "evaluate", "Evaluate")
    page.get_by_role("tab", name="Launch").click()
    split = page.get_by_role("textbox", name="Split (optional)")
    expect(split).to_have_value("test")  # leak-safe: the split the book was not built from
    episodes = page.get_by_role("spinbutton", name="Episodes (0 = all)")
    episodes.fill("3")
    episodes.press("Enter")
    spec = page.get_by_role("textbox", name="Model spec (optional)")
    spec.fill("tiny:no/such/folder")
    spec.press("Enter")
    # checked as it is typed, before anything is launched: the default methods use no model
    expect(page.get_by_role("alert").filter(has_text="No chosen method uses the model spec")).to_be_visible()
    expect(page.get_by_role("button", name="Launch")).to_be_disabled()
    _wait_for_href(page, "ev_new_llm=tiny")

    def check() -> None:
        expect(page.get_by_role("tab", name="Launch")).to_have_attribute("aria-selected", "true")
        expect(page.get_by_role("spinbutton", name="Episodes (0 = all)")).to_have_value("3")
        expect(page.get_by_role("textbox", name="Model spec (optional)")).to_have_value("tiny:no/such/folder")
        expect(page.get_by_role("textbox", name="Split (optional)")).to_have_value("test")

    _away_and_back(page, "Evaluate", "Evaluate", check)
    page.get_by_role("textbox", name="Model spec (optional)").fill("")
    page.get_by_role("textbox", name="Model spec (optional)").press("Enter")
    expect(page.get_by_role("button", name="Launch")).to_be_enabled()


def test_a_running_evaluation_shows_its_time_left_and_stops(page, server: dict) -> None:
    """A background job of the workspace (a real detached process) shows its progress with an estimate of the time
    left, and a Stop button that ends it; the page then says it was stopped, with no error from another run."""
    from playwright.sync_api import expect

    from worldsmith.evals import EvalRunStore
    from worldsmith.util import atomic_write_json

    store = EvalRunStore(server["workspace"])
    store.jobs.start("slow", [sys.executable, "-c", "import time; time.sleep(300)"],
                           workspace=server["workspace"])
    run = store.run("slow")
    run.path.mkdir(parents=True, exist_ok=True)
    atomic_write_json(run.progress_path, {"done": 1, "total": 4, "status": "running"})
    try:
        _open(page, server, "evaluate", "Evaluate")
        expect(page.get_by_text("left · 1/4")).to_be_visible()
        page.get_by_role("button", name="Stop").click()
        expect(page.get_by_text("was stopped after 1/4 units")).to_be_visible()
        expect(page.get_by_role("button", name="Stop")).to_have_count(0)
        assert not store.jobs.load("slow").alive
    finally:
        store.jobs.stop("slow", grace_s=1.0)


def test_build_defaults_to_the_train_split_and_keeps_its_settings(page, server: dict) -> None:
    from playwright.sync_api import expect

    _open(page, server, "build", "Build a worldbook")
    expect(_combobox(page, "build_split")).to_have_value("train")  # leak-safe: validation and test stay held out
    choose_option(page, "build_held", "test")
    name = page.get_by_role("textbox", name="Worldbook name")
    name.fill("kept-name")
    name.press("Enter")
    _wait_for_href(page, "build_out=kept-name")

    def check() -> None:
        expect(_combobox(page, "build_held")).to_have_value("test")
        expect(page.get_by_role("textbox", name="Worldbook name")).to_have_value("kept-name")

    _away_and_back(page, "Build", "Build a worldbook", check)
