"""Untrusted text in the real workbench: every page, on a workspace whose traces, worldbook, session, runs and
model calls carry script, HTML and Markdown payloads, shows them as text. No request leaves the server, no
payload runs, no `javascript:` link, image or frame is made from them, and the payload text itself is on the
page. (A bare http URL in the text still becomes a link, as GitHub-flavoured Markdown makes it: not fetched.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from browser_support import require_browser, streamlit_server
from hostile_workspace import BOOK, DATASET, SESSION, HostileIds, hostile, write_hostile_workspace

pytestmark = [pytest.mark.integration, pytest.mark.browser]

INERT_SCHEMES = ("data", "blob", "about")
_DOM_PROBLEMS = """() => {
  const problems = [];
  const external = (url) => { try { return new URL(url, location.href).host !== location.host; }
                              catch (error) { return true; } };
  for (const a of document.querySelectorAll('a[href]')) {
    if (a.getAttribute('href').trim().toLowerCase().startsWith('javascript:')) problems.push('javascript link');
  }
  for (const img of document.images) { if (img.src && external(img.src)) problems.push('image ' + img.src); }
  for (const frame of document.querySelectorAll('iframe')) problems.push('iframe ' + frame.src);
  for (const script of document.scripts) { if (script.text.includes('__pwned')) problems.push('script'); }
  if (window.__pwned !== undefined) problems.push('payload ran');
  return problems;
}"""


@pytest.fixture(scope="module")
def hostile_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, HostileIds]:
    """The hostile workspace and the ids that open its pages."""
    workspace = tmp_path_factory.mktemp("hostile-ws")
    return workspace, write_hostile_workspace(workspace, tmp_path_factory.mktemp("hostile-src"))


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, hostile_root: tuple[Path, HostileIds]) -> Iterator[dict]:
    """The workbench on the hostile workspace: no samples, and the bundled tiny model whatever $WORLDSMITH_MODEL
    says (the side-by-side view runs it, so model output is on the page too)."""
    require_browser()
    workspace, ids = hostile_root
    log = tmp_path_factory.mktemp("hostile-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": "", "WORLDSMITH_MODEL": ""}) as url:
        yield {"url": url, "ids": ids}


class Visit:
    """Pages of the app opened in one browser context, every request the browser makes recorded."""

    def __init__(self, page, base: str) -> None:
        self.page, self.base, self.requests = page, base, []
        page.on("request", lambda request: self.requests.append(request.url))

    def open(self, path: str):
        self.page.goto(f"{self.base}/{path}")
        self.page.locator('[data-test-script-state="notRunning"]').wait_for()
        return self.page

    def assert_inert(self) -> None:
        """Once the page settled: no request left the server, nothing ran, no script link, image or frame."""
        _settled(self.page)
        host = urlsplit(self.base).netloc
        leaked = [url for url in self.requests
                  if urlsplit(url).scheme not in INERT_SCHEMES and urlsplit(url).netloc != host]
        assert not leaked, f"requests left the server: {leaked}"
        assert self.page.evaluate(_DOM_PROBLEMS) == []


@pytest.fixture
def visit(page, server: dict) -> Visit:
    return Visit(page, server["url"])


def _settled(page) -> None:
    """Wait until the last run's elements are drawn (lazy widgets show skeletons first)."""
    page.locator('[data-test-script-state="notRunning"]').wait_for()
    deadline = time.monotonic() + 10
    while page.locator('[data-testid="stSkeleton"]').count() and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(0.5)  # images start loading as soon as they are in the DOM


def _shows(page, *tags: str) -> None:
    """The hostile text of each tag is on the page, as text."""
    from playwright.sync_api import expect

    for tag in tags:
        expect(page.get_by_text(hostile(tag)).filter(visible=True).first).to_be_visible()


def _pick(page, key: str, option: str) -> None:
    """Choose `option` in the select box with widget key `key` (typed into its search, then Enter)."""
    field = page.locator(f".st-key-{key} input")
    field.click()
    field.fill(option)
    field.press("Enter")


def test_home(visit: Visit) -> None:
    from playwright.sync_api import expect

    page = visit.open("")
    expect(page.get_by_role("heading", name=DATASET)).to_be_visible()
    visit.assert_inert()


def test_traces_episode(visit: Visit, server: dict) -> None:
    page = visit.open(f"traces?dataset={DATASET}&episode={quote(server['ids'].episode, safe='')}")
    visit.assert_inert()
    _shows(page, "ep0", "env", "tid", "split", "act", "role")


def test_worldbook_rule(visit: Visit, server: dict) -> None:
    page = visit.open(f"worldbook?book={BOOK}&rule={quote(server['ids'].rule, safe='')}")
    visit.assert_inert()
    _shows(page, "author", "message", "act")


def test_build_report(visit: Visit) -> None:
    from playwright.sync_api import expect

    page = visit.open("build")
    name = page.locator(".st-key-build_out input")
    name.fill("xssbuild")
    name.press("Enter")
    page.get_by_role("button", name="Build").click()
    # the build runs in the background: its page follows it and shows the report once it ends
    expect(page.get_by_text("Validation by cross-fitting, 3 folds")).to_be_visible(timeout=120_000)
    visit.assert_inert()
    _shows(page, "act")


def test_simulate_side_by_side(visit: Visit, server: dict) -> None:
    episode = quote(server["ids"].episode, safe="")
    page = visit.open(f"simulate?dataset={DATASET}&episode={episode}&turn=1&book={BOOK}")
    visit.assert_inert()
    _shows(page, "raw", "obs1")


def test_simulate_session(visit: Visit) -> None:
    from playwright.sync_api import expect

    page = visit.open("simulate")
    _pick(page, "sim_session", SESSION)
    expect(page.get_by_text("Keep the first N turns")).to_be_visible()
    visit.assert_inert()
    _shows(page, "session action")


def test_evaluate(visit: Visit) -> None:
    from playwright.sync_api import expect

    page = visit.open("evaluate")
    expect(page.get_by_role("heading", name="Leaderboard")).to_be_visible()
    visit.assert_inert()
    _shows(page, "created", "eval env")


def test_train(visit: Visit) -> None:
    page = visit.open("train")
    visit.assert_inert()
    _shows(page, "objective", "error")


def test_models_call_log(visit: Visit) -> None:
    from playwright.sync_api import expect

    page = visit.open("models")
    expect(page.get_by_role("heading", name="Call log")).to_be_visible()
    visit.assert_inert()
    _shows(page, "component", "spec")


@pytest.mark.parametrize("path", ["collect", "play"])
def test_environment_pages(visit: Visit, path: str) -> None:
    from playwright.sync_api import expect

    page = visit.open(path)
    expect(page.get_by_role("heading", name=path.title())).to_be_visible()
    visit.assert_inert()
