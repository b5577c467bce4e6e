"""The workbench never misleads, in real Chromium on a fresh workspace that imported the bundled samples:
the first evaluation runs (held-out split, small-sample marks), a failed run shows its error where the user
is, and a side-by-side method whose model failed is labelled a fallback."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_support import require_browser, streamlit_server
from workbench_support import REPO

from ports import free_port

pytestmark = [pytest.mark.integration, pytest.mark.browser]
RUN_WAIT_MS = 120_000  # a background evaluation on 7 held-out games


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """`streamlit run workbench/app.py` on a fresh workspace; the first start imports data_samples/."""
    require_browser()
    workspace = tmp_path_factory.mktemp("honest-ws") / "ws"
    log = tmp_path_factory.mktemp("honest-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": str(REPO / "data_samples"),
                                           "WORLDSMITH_MODEL": ""}) as url:
        yield {"url": url, "workspace": workspace, "log": log}


def _open(page, server: dict, path: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/{path}")
    expect(page.get_by_role("heading", name=path.capitalize())).to_be_visible()


def test_the_first_evaluation_on_a_fresh_workspace_shows_results(page, server: dict) -> None:
    from playwright.sync_api import expect

    page.goto(server["url"])  # the first start: samples imported, split, book built on train
    _open(page, server, "evaluate")
    page.get_by_role("tab", name="Launch").click()
    expect(page.get_by_role("textbox", name="Split (optional)")).to_have_value("test")
    expect(page.get_by_role("textbox", name="Environment (optional)")).to_have_value("alfworld")
    page.get_by_role("textbox", name="Run name").fill("first")
    page.get_by_role("button", name="Launch").click()
    expect(page.get_by_text("Started run")).to_be_visible()
    page.get_by_role("tab", name="Results").click()
    expect(page.get_by_text("Small sample: intervals marked")).to_be_visible(timeout=RUN_WAIT_MS)
    expect(page.get_by_role("tabpanel", name="Results").first).to_contain_text("protocols drift, next-obs")
    expect(page.get_by_text("· finished ·")).to_be_visible()  # the launched run, in the open
    expect(page.get_by_text("refusing to evaluate")).to_have_count(0)
    # every result says what produced it: method, model, dataset (with its revision), split, n and the run
    produced = page.get_by_role("tabpanel", name="Results").first.get_by_text(
        re.compile(r"^Produced by: method harness · model none · dataset \S+ @ \S+ · split test · "
                   r"n \d+ turns of \d+ episodes · run first")).first
    expect(produced).to_be_visible()


def test_a_failed_run_shows_its_error_where_the_user_is(page, server: dict) -> None:
    from playwright.sync_api import expect

    _open(page, server, "evaluate")
    page.get_by_role("tab", name="Launch").click()
    page.get_by_role("textbox", name="Run name").fill("broken")
    page.get_by_role("textbox", name="Model spec (optional)").fill("tiny:no/such/folder")
    page.get_by_role("textbox", name="Model spec (optional)").press("Enter")
    refused = page.get_by_role("alert").filter(has_text="No chosen method uses the model spec")
    expect(refused).to_be_visible()  # refused in the form, before launch: the default methods use no model
    expect(page.get_by_role("button", name="Launch")).to_be_disabled()
    page.get_by_role("textbox", name="Model spec (optional)").fill("")
    page.get_by_role("textbox", name="Model spec (optional)").press("Enter")
    page.get_by_role("textbox", name="Split (optional)").fill("nosuch")
    page.get_by_role("textbox", name="Split (optional)").press("Enter")
    page.get_by_role("button", name="Launch").click()
    failed = page.get_by_text("failed (exit code").filter(has_text="broken")
    expect(failed).to_be_visible(timeout=RUN_WAIT_MS)  # visible: not inside a collapsed section
    expect(failed).to_contain_text("nosuch")


def test_a_side_by_side_method_whose_model_failed_is_labelled_a_fallback(page, server: dict) -> None:
    from playwright.sync_api import expect

    port = free_port()  # nothing listens there
    _open(page, server, "simulate")
    page.get_by_text("Side by side", exact=True).click()
    spec = page.get_by_role("textbox", name="Model spec (direct, rag, worldbook-prompt)")
    spec.fill(f"openai:m@http://127.0.0.1:{port}/v1?max_retries=0&timeout=5")
    spec.press("Enter")
    page.get_by_role("button", name="Step", exact=True).click()
    expect(page.get_by_text("direct · fallback")).to_be_visible()
    label = page.get_by_text("Fallback: direct's model failed")
    expect(label).to_be_visible()
    expect(label).to_contain_text("Not scored as direct")
