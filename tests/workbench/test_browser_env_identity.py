"""In headless Chromium (issue 46): an upload that matches two environments of the workspace is asked about on the
Traces page and joins the one chosen; the Home page lists the datasets, worldbooks and runs."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_support import WAIT_MS, choose_option, require_browser, streamlit_server

from helpers import toolshop_files
from workbench.traces.importer import candidate_label
from worldsmith.workspace import Workspace

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """A workspace holding one API's train file under two environment ids (two datasets), and its test file."""
    require_browser()
    workspace = tmp_path_factory.mktemp("env-identity-ws")
    files = tmp_path_factory.mktemp("env-identity-files")
    train, test = toolshop_files(files, declared=False)
    Workspace(workspace).ingest([train], "shop_a", env="shop-a")
    Workspace(workspace).ingest([train], "shop_b", env="shop-b")
    log = tmp_path_factory.mktemp("env-identity-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": workspace, "test": test}


def test_an_ambiguous_upload_is_asked_about_and_joins_the_chosen_environment(page, server: dict) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/traces")
    page.get_by_text("Import traces", exact=True).click()
    page.set_input_files("input[type=file]", str(server["test"]))
    name = page.locator(".st-key-tr_import_dataset input")
    name.fill("shop_test")
    name.press("Enter")
    page.locator(".st-key-tr_import_button button").click()
    expect(page.get_by_text("matches 2 environments of the workspace")).to_be_visible(timeout=WAIT_MS)
    workspace = Workspace(server["workspace"])
    kept = workspace.dataset("shop_test").environments()
    assert len(kept) == 1 and kept[0] not in ("shop-a", "shop-b")

    (file,) = workspace.dataset("shop_test").reports()[0]["files"]
    candidate = next(c for c in file["env_candidates"] if c["env"] == "shop-b")
    choose_option(page, "tr_env_choice_0", candidate_label(candidate))
    page.locator(".st-key-tr_env_join_0 button").click()
    expect(page.get_by_text("matches 2 environments of the workspace")).to_have_count(0, timeout=WAIT_MS)
    expect(page.get_by_text(re.compile(r"joined shop-b: your choice among shop-"))).to_be_visible(timeout=WAIT_MS)
    assert workspace.dataset("shop_test").environments() == ["shop-b"]


def test_home_lists_the_workspace(page, server: dict) -> None:
    from playwright.sync_api import expect

    page.goto(server["url"])
    for heading in ("Running jobs (0)", "Worldbooks (0)", "Evaluation runs (0)"):
        expect(page.get_by_role("heading", name=heading)).to_be_visible(timeout=WAIT_MS)
    expect(page.get_by_role("heading", name=re.compile(r"^Datasets \(\d+\)$"))).to_be_visible()
    expect(page.get_by_role("heading", name="shop_a")).to_be_visible()
