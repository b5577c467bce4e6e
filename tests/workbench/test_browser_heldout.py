"""The curation loop in real Chromium: a Worldbook link with the held-out split in its URL, a rule's template
edited and saved, and the held-out delta appears, scrolled into view, with the broken turns, each a working link into
Traces and what the edit changed in it (the one diff view)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_support import require_browser, streamlit_server
from heldout_support import BOOK, DATASET, loop_workspace

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    require_browser()
    workspace = tmp_path_factory.mktemp("heldout-ws")
    rule_id = loop_workspace(workspace)
    log = tmp_path_factory.mktemp("heldout-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": workspace, "log": log, "rule": rule_id}


def test_editing_a_template_shows_the_held_out_delta_and_flipped_turns(page, server: dict) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/worldbook?book={BOOK}&rule={server['rule']}"
              f"&heldout_dataset={DATASET}&heldout_split=test")
    expect(page.get_by_text("This is the book's first version")).to_be_visible()
    template = page.get_by_role("textbox", name="Observation template").filter(visible=True).first
    template.fill("You go nowhere.")
    template.press("Control+Enter")
    page.get_by_role("button", name="Save rule").click()
    expect(page.get_by_text("fail its own evidence")).to_be_visible()  # the guard, before anything is saved
    page.get_by_role("button", name="Save anyway").click()
    expect(page.get_by_text("Held-out delta of")).to_be_visible()
    delta = page.locator(".st-key-heldout-delta")
    expect(delta).to_be_in_viewport()  # the save was made at the rule card, below: the delta is brought up
    expect(page.get_by_text("broken held-out turns")).to_be_visible()
    produced = page.get_by_text(re.compile(rf"^Produced by: method harness · model none · dataset {DATASET} @ \S+ · "
                                           rf"split test · n \d+ paired turns of \d+ episodes · run {BOOK}: content "))
    expect(produced.first).to_be_visible()  # what produced the delta's numbers
    links = page.locator("a[href*='traces']").filter(has_text="broken")
    expect(links.first).to_be_visible()
    assert links.count() >= 1 and not page.locator("a[href*='traces']").filter(has_text="fixed").count()
    href = links.first.get_attribute("href") or ""
    assert f"dataset={DATASET}" in href and "turn=" in href
    assert "heldout_split=test" in page.evaluate("window.location.href")  # the choice stays in the URL
    change = delta.locator(".ws-diff").filter(has_text="what the edit changed (before → after)").first
    expect(change).to_be_visible()  # the words the edit changed, not three whole observations
    expect(change.locator("ins.ws-diff-ins").first).to_contain_text("nowhere")
    expect(delta.get_by_text("The target is the before.").first).to_be_visible()  # a broken turn was right before
    turn = href.split("turn=")[1].split("&")[0].replace("%23", "#")
    links.first.click()
    expect(page.get_by_role("heading", name="Traces")).to_be_visible()
    expect(page.get_by_text(turn.split("#")[0]).first).to_be_visible()
    assert "/traces" in page.evaluate("window.location.href")
