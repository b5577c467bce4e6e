"""The real workbench server driven in headless Chromium: upload and import, deep links, row selection."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_support import WAIT_MS, require_browser, streamlit_server

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, samples_folder: Path) -> Iterator[dict]:
    """`streamlit run workbench/app.py` on a free port, with a fresh workspace and the samples."""
    require_browser()
    workspace = tmp_path_factory.mktemp("browser-ws")
    log = tmp_path_factory.mktemp("browser-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": str(samples_folder)}) as url:
        yield {"url": url, "workspace": workspace, "log": log}


def _href(page) -> str:
    # page.url misses history.replaceState updates; the document knows the real address.
    return page.evaluate("window.location.href")


def _wait_for_href(page, fragment: str) -> str:
    deadline = time.monotonic() + WAIT_MS / 1000
    while time.monotonic() < deadline:
        href = _href(page)
        if fragment in href:
            return href
        time.sleep(0.2)
    raise AssertionError(f"{fragment!r} never appeared in the address bar: {_href(page)}")


def _stable_box(locator) -> dict:
    """The element's box once the layout stopped moving (reruns re-render the page)."""
    previous = None
    for _ in range(50):
        box = locator.bounding_box()
        if box is not None and box == previous:
            return box
        previous = box
        time.sleep(0.2)
    raise AssertionError("the element kept moving")


def _click_first_row(page, table) -> None:
    """Tick the first row's selection box of an st.dataframe (a canvas: click by position)."""
    from playwright.sync_api import expect

    expect(table).to_be_visible()
    for _ in range(3):
        table.scroll_into_view_if_needed()
        box = _stable_box(table)
        page.mouse.click(box["x"] + 16, box["y"] + 35 + 17)  # below the 35 px header row, in the checkbox column
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if "episode=" in _href(page):
                return
            time.sleep(0.2)
    raise AssertionError(f"clicking the first row selected nothing: {_href(page)}")


def test_upload_import_and_report(page, server: dict, openai_file: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/traces")
    # zero-config start imported the samples
    picker = page.locator(".st-key-tr_dataset_pick input")
    expect(picker).to_have_value("samples")
    page.get_by_text("Import traces", exact=True).click()
    page.set_input_files("input[type=file]", str(openai_file))
    expect(page.get_by_text(openai_file.name)).to_be_visible()
    name = page.locator(".st-key-tr_import_dataset input")
    name.fill("browser-upload")
    name.press("Enter")
    button = page.locator(".st-key-tr_import_button button")
    expect(button).to_be_enabled()
    button.click()
    expect(page.get_by_text("Imported 1 episodes, 1 turns into")).to_be_visible()
    expect(picker).to_have_value("browser-upload")
    expect(page.get_by_text("Episodes 1–1 of 1")).to_be_visible()
    _wait_for_href(page, "dataset=browser-upload")
    page.screenshot(path=str(tmp_path / "traces-after-import.png"), full_page=True)

    uploads = server["workspace"] / "uploads"  # the uploaded copy is removed once imported
    assert not uploads.exists() or not [f for f in uploads.rglob("*") if f.is_file()]

    # open the episode by clicking its row's selection box in the table
    _click_first_row(page, page.locator("[class*='st-key-tr_episodes_']"))
    _wait_for_href(page, "episode=c1")
    expect(page.get_by_text("c1#0", exact=True)).to_be_visible()
    expect(page.get_by_text('"Mia"')).to_be_visible()


def test_deep_link_shows_the_turn(page, server: dict, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/traces?dataset=samples&turn=terminal-1%232")
    linked = page.locator(".st-key-linked-turn")
    expect(linked).to_be_visible()
    expect(linked.get_by_text("linked turn")).to_be_visible()
    expect(linked.get_by_text("terminal-1#2", exact=True)).to_be_visible()
    expect(linked.get_by_text("root@host:/app/tests# pwd")).to_be_visible()
    assert "turn=terminal-1%232" in _href(page)
    page.screenshot(path=str(tmp_path / "deep-link.png"))


def test_home_links_to_traces(page, server: dict) -> None:
    from playwright.sync_api import expect

    page.goto(server["url"])
    expect(page.get_by_role("heading", name="worldsmith")).to_be_visible()
    page.get_by_role("link", name="Browse in Traces").first.click()
    expect(page.get_by_role("heading", name="Traces")).to_be_visible()
    _wait_for_href(page, "/traces?dataset=")
