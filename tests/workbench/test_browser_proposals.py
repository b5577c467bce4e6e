"""In real Chromium, on the bundled samples with a held-out split: a rule's proposed patch is applied with one click
and, measured again on the saved version, the simulator's held-out fidelity rises (BFCL `check_tire_pressure`).

The ALFWorld `open` proposal fixes the rule's form on held-out turns but cannot move the simulator's answers (they
list the contents of a closed receptacle, unknown before the observation shows them); its page shows that too."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from browser_support import require_browser, streamlit_server

from proposal_samples import BFCL_BOOK, BFCL_RULE, BFCL_SEED, BOOK, RULE, build_heldout_workspace
from worldsmith.evals.heldout import HeldOut, heldout_delta
from worldsmith.workspace import Workspace
from worldsmith.worldbook import WorldbookStore
from worldsmith.worldbook.proposal_forms import heldout_evidence

pytestmark = [pytest.mark.integration, pytest.mark.browser]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    require_browser()
    workspace = build_heldout_workspace(tmp_path_factory.mktemp("proposals-ws"))
    log = tmp_path_factory.mktemp("proposals-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": workspace, "log": log}


@pytest.fixture(scope="module")
def bfcl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    require_browser()
    workspace = build_heldout_workspace(tmp_path_factory.mktemp("proposals-bfcl"), env="bfcl", book=BFCL_BOOK,
                                        seed=BFCL_SEED)
    log = tmp_path_factory.mktemp("proposals-bfcl-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": workspace, "log": log}


def _propose(page, url: str, book: str, rule: str):
    """Open the rule card, press Propose; the first proposal's lines (rule form, simulator fidelity)."""
    from playwright.sync_api import expect

    page.goto(f"{url}/worldbook?book={book}&rule={rule}")
    page.get_by_role("button", name="Propose fixes for its failed turns").click()
    form = page.get_by_text(re.compile(r"Held-out \(test, \d+ turns of the action\)")).first
    expect(form).to_be_visible()
    fidelity = page.get_by_text(re.compile(r"simulator fidelity on \d+ held-out")).first
    expect(fidelity).to_be_visible()
    expect(page.locator("code").filter(has_text=f"- {rule}.").first).to_be_visible()
    return form.inner_text(), fidelity.inner_text()


def _apply_first(page, store: WorldbookStore, book: str) -> tuple[str, str]:
    from playwright.sync_api import expect

    first = store.head(book)
    page.get_by_role("button", name="Apply").first.click()
    expect(page.get_by_text("Applied the").first).to_be_visible()
    head = store.head(book)
    assert head != first and store.info(book, head).parent == first
    return first, head


def _measured(workspace, store: WorldbookStore, book: str, first: str, head: str, action: str):
    heldout, split = heldout_evidence(Workspace(workspace), store, book, head)
    chosen = HeldOut(dataset="samples", split=split, env=store.info(book, head).sources[0]["env"],
                     episodes=tuple(sorted({item.turn_id.rsplit("#", 1)[0] for item in heldout})))
    return heldout_delta(store.load(book, first), store.load(book, head), chosen, Workspace(workspace), action=action)


def test_applying_a_proposal_raises_the_simulators_held_out_fidelity(bfcl_server: dict, browser) -> None:
    from playwright.sync_api import expect

    context = browser.new_context(viewport={"width": 1400, "height": 1200})
    page = context.new_page()
    page.set_default_timeout(30_000)
    expect.set_options(timeout=30_000)
    try:
        _, fidelity = _propose(page, bfcl_server["url"], BFCL_BOOK, BFCL_RULE)
        shown = re.search(r"exact match ([\d.]+) (?:->|→) ([\d.]+)", fidelity)
        assert shown and float(shown.group(2)) > float(shown.group(1)), fidelity
        store = WorldbookStore(bfcl_server["workspace"] / "worldbooks")
        first, head = _apply_first(page, store, BFCL_BOOK)
    finally:
        context.close()
    measured = _measured(bfcl_server["workspace"], store, BFCL_BOOK, first, head, "check_tire_pressure")
    moved = measured.by_action["check_tire_pressure"]["exact_match"]
    assert (round(moved.before, 3), round(moved.after, 3)) == (float(shown.group(1)), float(shown.group(2)))
    assert moved.after > moved.before and measured.metrics["exact_match"].diff > 0
    assert measured.fixed and not measured.broken


def test_the_alfworld_proposal_fixes_the_rules_form_and_loses_no_fidelity(page, server: dict) -> None:
    form, _ = _propose(page, server["url"], BOOK, RULE)
    shown = re.search(r"template fits (\d+) → (\d+)", form)
    assert shown and int(shown.group(2)) > int(shown.group(1)), form
    store = WorldbookStore(server["workspace"] / "worldbooks")
    first, head = _apply_first(page, store, BOOK)
    measured = _measured(server["workspace"], store, BOOK, first, head, "open")
    assert measured.turns > 0 and not measured.broken
    assert all(m.diff >= 0 for m in measured.by_action["open"].values())


@pytest.fixture(scope="module")
def eval_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The BFCL book and a real evaluation run (no-model harness) on the held-out split."""
    from worldsmith.evals.run import EvalConfig, run_eval

    require_browser()
    workspace = build_heldout_workspace(tmp_path_factory.mktemp("proposals-eval"), env="bfcl", book=BFCL_BOOK,
                                        seed=BFCL_SEED)
    run_eval(EvalConfig(name="bfcl-test", book=BFCL_BOOK, dataset="samples", split="test", env="bfcl",
                        methods=["harness"], resamples=200, protocols=("next-obs",)), workspace)
    log = tmp_path_factory.mktemp("proposals-eval-log") / "streamlit.log"
    with streamlit_server(workspace, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": workspace, "log": log}


def test_a_failure_cluster_proposes_and_applies_a_fix_for_its_action(eval_server: dict, browser) -> None:
    from playwright.sync_api import expect

    store = WorldbookStore(eval_server["workspace"] / "worldbooks")
    first = store.head(BFCL_BOOK)
    context = browser.new_context(viewport={"width": 1400, "height": 1200})
    page = context.new_page()
    page.set_default_timeout(60_000)  # clustering loads MiniLM in the server
    expect.set_options(timeout=90_000)
    try:
        page.goto(f"{eval_server['url']}/evaluate")
        page.get_by_role("tab", name="Failures").click()
        page.get_by_role("button", name="Cluster the wrong predictions").click()
        cluster = page.get_by_test_id("stExpander").filter(has_text="check_tire_pressure ×2").first
        expect(cluster).to_be_visible()
        cluster.locator("summary").click()
        expect(cluster.get_by_role("combobox", name="Propose fixes for a rule behind this cluster")).to_be_visible()
        # the clustering run draws the clusters before it ends (a chart follows); in two full-suite runs a click made
        # then never reached the button (no spinner, no result in 90 s): click once the app is idle
        expect(page.get_by_test_id("stStatusWidgetRunningIcon")).to_have_count(0)
        cluster.get_by_role("button", name="Propose fixes for its failed turns").click()
        fidelity = cluster.get_by_text(re.compile(r"simulator fidelity on \d+ held-out")).first
        expect(fidelity).to_be_visible()
        shown = re.search(r"exact match ([\d.]+) (?:->|→) ([\d.]+)", fidelity.inner_text())
        assert shown and float(shown.group(2)) > float(shown.group(1)), fidelity.inner_text()
        cluster.get_by_role("button", name="Apply").first.click()
        expect(page.get_by_text("Applied the").first).to_be_visible()
    finally:
        context.close()
    head = store.head(BFCL_BOOK)
    assert head != first and store.info(BFCL_BOOK, head).parent == first
    assert store.load(BFCL_BOOK).rule(BFCL_RULE).conditions != store.load(BFCL_BOOK, first).rule(BFCL_RULE).conditions
