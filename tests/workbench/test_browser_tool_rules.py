"""Tool-API curation and failure analysis in real Chromium, on a worldbook built from the recorded toolshop runs:
change a write rule's status with a reason on the Worldbook page (a new version), then on the Simulate page start
a session from a recorded episode, step a write and see the record it changed, field by field, and the source."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import choose_option, require_browser, streamlit_server, widget_class
from toolshop_support import BOOK, DATASET, toolshop_workspace, write_episode

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The workbench on a workspace with dataset `shop` (toolshop expert runs) and worldbook `shop` built on it."""
    require_browser()
    root = tmp_path_factory.mktemp("tool-rules-ws")
    book = toolshop_workspace(root)
    log = tmp_path_factory.mktemp("tool-rules-log") / "streamlit.log"
    with streamlit_server(root, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": root, "log": log, "book": book}


def test_change_a_tool_rules_status_with_a_reason(page, server: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from worldsmith.worldbook import RuleStatus, WorldbookStore

    store = WorldbookStore(server["workspace"] / "worldbooks")
    first = store.head(BOOK)
    rule = next(r for r in server["book"].tool_rules if r.tool == "cancel_order")  # the other test steps a write
    page.goto(f"{server['url']}/worldbook")
    expect(page.get_by_role("heading", name="Worldbook")).to_be_visible()
    page.get_by_role("tab", name="Tool rules").click()
    expect(page.get_by_text(f"of {len(server['book'].tool_rules)} tool rules")).to_be_visible()
    choose_option(page, "wb_tool_rule", rule.id)
    expect(page.get_by_role("heading", name=rule.id)).to_be_visible()
    expect(page.get_by_text("cancel_order selects order by order_id; copies reason → cancel_reason")).to_be_visible()
    button = page.locator(widget_class("wb_tset_conflicted")).get_by_role("button")
    expect(button).to_be_disabled()  # a reason first
    reason = page.locator(widget_class(f"wb_tstatus_reason:{rule.id}")).locator("input")
    reason.fill("refund method differs on gift cards")
    reason.press("Enter")
    expect(button).to_be_enabled()
    button.click()
    expect(page.get_by_text(f"{rule.id} is now conflicted: version", exact=False)).to_be_visible()
    expect(page.get_by_role("tab", name="Tool rules")).to_have_attribute("aria-selected", "true")  # still there
    expect(page.get_by_role("heading", name=rule.id)).to_be_visible()
    head = store.head(BOOK)
    assert head != first and store.info(BOOK, head).message == f"{rule.id}: conflicted: refund method differs on gift cards"
    assert next(r for r in store.load(BOOK).tool_rules if r.id == rule.id).status == RuleStatus.CONFLICTED
    expect(page.get_by_text(f"version {head}", exact=False).first).to_be_visible()
    page.screenshot(path=str(tmp_path / "tool-rule-status.png"), full_page=True)


def test_step_a_write_and_see_the_record_diff_and_the_source(page, server: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    from worldsmith.sim import Session

    episode, index = write_episode("modify_order_address")
    call = episode.turns[index].action
    page.goto(f"{server['url']}/simulate")
    expect(page.get_by_role("heading", name="Simulate")).to_be_visible()
    choose_option(page, "sim_ep_dataset", DATASET)
    choose_option(page, "sim_ep_episode", episode.id)
    start = page.locator(widget_class("sim_from_episode")).get_by_role("button")
    expect(start).to_be_enabled()
    start.click()
    expect(page.get_by_text("created, opening as episode")).to_be_visible()
    action = page.locator(widget_class("sim_action")).locator("input")
    action.fill(json.dumps({"name": call.name, "arguments": call.arguments}))
    page.get_by_role("button", name="Step").click()
    order = call.arguments["order_id"]
    record = page.get_by_text(re.compile(rf"Record order_id={re.escape(order)} · \d+ field changes?"))
    expect(record).to_be_visible()
    diff = page.locator(".ws-diff").filter(has_text="fields the call changed").first  # the one diff view
    expect(diff.locator("tr.ws-diff-changed").filter(has_text="/shipping_address/line1")).to_be_visible()
    expect(page.get_by_text(re.compile(r"Answered by (state:)?record_write"))).to_be_visible()
    sessions = sorted((server["workspace"] / "sessions").iterdir())
    with Session.open(sessions[-1]) as session:
        audit = session.turns()[0].prediction.audit
    assert [r["key"] for r in audit.records] == [f"order_id={order}"]
    assert audit.records[0]["after"]["shipping_address"]["line1"] == call.arguments["line1"]
    assert audit.records[0]["before"]["shipping_address"]["line1"] != call.arguments["line1"]
    record.scroll_into_view_if_needed()
    page.screenshot(path=str(tmp_path / "simulate-record-diff.png"))
