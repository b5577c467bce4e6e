"""The friction items of the curation loop in real Chromium: the Worldbook page's URL round trip (a rule and
its filters survive a trip into Traces and Back), the transcript view of a chat episode, starting a
simulation from a recorded episode, and /home."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import WAIT_MS, choose_option, require_browser, streamlit_server
from workbench_support import REPO

pytestmark = [pytest.mark.integration, pytest.mark.browser]

ALFWORLD = REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, chat_file: Path) -> Iterator[dict]:
    """The workbench on a workspace with datasets `alf` (ALFWorld expert runs) and `chat` (OpenAI chats),
    and worldbook `alf` built from `alf`."""
    require_browser()
    from helpers import sample_episodes
    from worldsmith.sim.route_learning import build_simulator_book
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook import WorldbookStore

    root = tmp_path_factory.mktemp("curation-ws")
    workspace = Workspace(root)
    assert workspace.ingest([ALFWORLD], "alf").committed
    assert workspace.ingest([chat_file], "chat").committed
    book = build_simulator_book(sample_episodes("alfworld_expert"), name="alf").book
    WorldbookStore(root / "worldbooks").save(book, sources=[{"dataset": "alf"}])
    log = tmp_path_factory.mktemp("curation-log") / "streamlit.log"
    with streamlit_server(root, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": root, "log": log, "book": book}


def _href(page) -> str:
    return page.evaluate("window.location.href")


def _wait_for_href(page, fragment: str, *, absent: bool = False, timeout_s: float = WAIT_MS / 1000) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        href = _href(page)
        if (fragment not in href) if absent else (fragment in href):
            return href
        time.sleep(0.2)
    raise AssertionError(f"{fragment!r} {'stayed in' if absent else 'never appeared in'} the address bar: {_href(page)}")


def _stable_box(locator) -> dict:
    previous = None
    for _ in range(50):
        box = locator.bounding_box()
        if box is not None and box == previous:
            return box
        previous = box
        time.sleep(0.2)
    raise AssertionError("the element kept moving")


def test_a_rule_and_its_filters_survive_a_trip_into_traces_and_back(page, server: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    book = server["book"]
    rule = next(r for r in book.supported_rules() if r.action == "take" and r.provenance.supporting)
    page.goto(f"{server['url']}/worldbook")
    expect(page.get_by_role("heading", name="Worldbook")).to_be_visible()
    search = page.locator(".st-key-wb_f_search input")
    search.fill(rule.id)
    search.press("Enter")
    _wait_for_href(page, "wb_f_search=")
    expect(page.get_by_text("1 of", exact=False)).to_be_visible()
    # open the rule by clicking its row in the rules table (a canvas: click the selection box by position)
    table = page.locator("[class*='st-key-wb_rules_table_']")
    expect(table).to_have_count(1)  # the table of the filtered rules only (the unfiltered one is gone)
    expect(table).to_be_visible()
    for _ in range(3):
        box = _stable_box(table)
        page.mouse.click(box["x"] + 16, box["y"] + 35 + 17)
        try:
            _wait_for_href(page, "wb_rule=", timeout_s=5)
            break
        except AssertionError:
            continue
    href = _wait_for_href(page, "wb_rule=")
    assert "wb_f_search=" in href  # (the worldbook is the default one, so the URL leaves it out)
    expect(page.get_by_role("heading", name=rule.id)).to_be_visible()
    # an evidence turn previews in place, then its link goes to Traces
    turn = rule.provenance.supporting[0]
    preview = page.locator("[data-testid='stExpander']").filter(has=page.locator("summary", has_text=turn)).first
    preview.locator("summary").click()
    expect(preview.get_by_text("Observation", exact=True)).to_be_visible()
    link = preview.get_by_role("link", name=turn)
    expect(link).to_be_visible()
    for _ in range(3):  # a click while the page still settles can be lost
        link.click()
        try:
            _wait_for_href(page, "/traces?", timeout_s=5)
            break
        except AssertionError:
            continue
    expect(page.get_by_role("heading", name="Traces")).to_be_visible()
    _wait_for_href(page, "/traces?")
    page.go_back()
    _wait_for_href(page, "/worldbook?")
    expect(page.get_by_role("heading", name=rule.id)).to_be_visible()
    expect(page.locator(".st-key-wb_f_search input")).to_have_value(rule.id)
    assert "wb_rule=" in _href(page)
    page.screenshot(path=str(tmp_path / "worldbook-after-back.png"), full_page=True)


def test_a_chat_episode_reads_as_a_transcript(page, server: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/traces?dataset=chat&episode=c-lose")
    messages = page.locator("[data-testid='stChatMessage']")
    expect(messages.first).to_be_visible()
    expect(messages.first).to_contain_text("hi from c-lose")
    expect(page.get_by_text("Tool call", exact=True).first).to_be_visible()
    expect(page.get_by_text("Tool result", exact=True).first).to_be_visible()
    expect(page.get_by_text("Changes since turn 0's result: 2 changed")).to_be_visible()
    # the message comes before the first tool call on the page
    first_message = messages.first.bounding_box()
    first_call = page.get_by_text("Tool call", exact=True).first.bounding_box()
    assert first_message["y"] < first_call["y"]
    page.screenshot(path=str(tmp_path / "transcript.png"), full_page=True)


def test_start_a_simulation_from_a_recorded_episode(page, server: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from worldsmith.workspace import Workspace

    episode = next(Workspace(server["workspace"]).dataset("alf").iter_episodes())
    page.goto(f"{server['url']}/simulate")
    expect(page.get_by_role("heading", name="Simulate")).to_be_visible()
    choose_option(page, "sim_ep_dataset", "alf")
    choose_option(page, "sim_ep_episode", episode.id)
    button = page.locator(".st-key-sim_from_episode button")
    expect(button).to_be_enabled()
    button.click()
    expect(page.get_by_text("created, opening as episode")).to_be_visible()
    first_line = episode.initial_observation.text.strip().splitlines()[0]
    expect(page.get_by_text(first_line).first).to_be_visible()
    page.screenshot(path=str(tmp_path / "simulate-from-episode.png"), full_page=True)


def test_home_answers_at_slash_home(page, server: dict) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/home")
    expect(page.get_by_role("heading", name="worldsmith")).to_be_visible()
    expect(page.get_by_text("Page not found")).to_have_count(0)
