"""Two evaluation runs compared turn by turn, and failures tagged, in real Chromium.

One server, one workspace holding two hand-written runs of the same turns (`eval_fixtures`): run `b` fixes
nearest's 'take' turn, so 4 of 40 paired turns differ.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from browser_support import choose_option, require_browser, streamlit_server, widget_class
from eval_fixtures import REFERENCES, write_run

pytestmark = [pytest.mark.integration, pytest.mark.browser]

FIXED_TURN = 1  # nearest's 'take' turn: wrong in run a, right in run b


def _fix_turn(folder: Path) -> None:
    records = pd.read_parquet(folder / "records.parquet")
    fixed = (records["method"] == "nearest") & (records["turn"] == FIXED_TURN)
    records.loc[fixed, "prediction"] = REFERENCES[FIXED_TURN]
    records.loc[fixed, "exact_match"] = 1.0
    records.to_parquet(folder / "records.parquet", index=False)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    require_browser()
    root = tmp_path_factory.mktemp("compare-ws")
    write_run(root, "a", ["harness", "nearest"])
    _fix_turn(write_run(root, "b", ["harness", "nearest"]))
    log = tmp_path_factory.mktemp("compare-log") / "streamlit.log"
    with streamlit_server(root, log, {"WORLDSMITH_SAMPLES": ""}) as url:
        yield {"url": url, "workspace": root, "log": log}


def _open_run(page: Any, server: dict[str, Any], run: str, tab: str) -> None:
    from playwright.sync_api import expect

    page.goto(f"{server['url']}/evaluate")
    expect(page.get_by_role("heading", name="Evaluate")).to_be_visible()
    choose_option(page, "ev_run", f"{run} · next-obs · harness, nearest")
    page.get_by_role("tab", name=tab).click()


def test_two_runs_compared_turn_by_turn_with_the_paired_interval(page: Any, server: dict[str, Any]) -> None:
    from playwright.sync_api import expect

    _open_run(page, server, "a", "Compare")
    choose_option(page, "ev_cmp_run", "b")
    expect(page.get_by_text("Turn by turn", exact=True)).to_be_visible()
    expect(page.get_by_text("4 of 40 paired turns differ", exact=False)).to_be_visible()
    line = page.get_by_text(re.compile(r"exact_match, B − A: \+0\.100 \[\+0\.\d+, \+0\.\d+\] on the 40 turns"))
    expect(line).to_be_visible()  # 4 of 40 turns gained 1: +0.100, its interval resampled over the 4 episodes
    choose_option(page, "ev_cmp_open_", "ep-0 · turn 1 · nearest · take mug 1 from desk 1")
    turn = page.locator(widget_class("ev-cmp-turn"))
    diff = turn.locator(".ws-diff").filter(has_text="B's prediction against A's")
    expect(diff).to_be_visible()
    expect(diff.locator("del.ws-diff-del").first).to_contain_text("Nothing")  # A's words, gone in B
    expect(diff.locator("ins.ws-diff-ins").first).to_contain_text("pick up")
    page.get_by_text("Only where they differ").click()  # every paired turn now
    grid = page.locator(widget_class("ev_cmp_turns_table"))
    expect(grid).to_be_visible()


def test_a_failure_is_tagged_kept_filtered_and_listed_by_the_cli(page: Any, server: dict[str, Any],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from playwright.sync_api import expect

    from worldsmith.cli.main import main
    from worldsmith.workspace import FailureTags

    _open_run(page, server, "a", "Failures")
    expect(page.get_by_text("The 2 wrong predictions")).to_be_visible()  # harness misses 'look' on ep-1, ep-3
    choose_option(page, "ev_fx_open_", "ep-1 · turn 4 · look")
    diff = page.locator(".ws-diff").filter(has_text="the prediction against the real observation")
    expect(diff).to_be_visible()
    expect(diff.locator("ins.ws-diff-ins").first).to_contain_text("desk")
    page.get_by_label("Tag", exact=True).fill("wrong place")
    page.get_by_label("Note", exact=True).fill("faces the desk, not the drawer")
    page.get_by_role("button", name="Save tag").click()
    expect(page.get_by_text("Tagged", exact=False).first).to_be_visible()
    [saved] = FailureTags(server["workspace"]).list(run="a")
    assert (saved.episode_id, saved.turn, saved.method, saved.tag, saved.note) == (
        "ep-1", 4, "harness", "wrong place", "faces the desk, not the drawer")
    expect(page.locator(widget_class("ev_fx_tag_filter"))).to_be_visible()
    choose_option(page, "ev_fx_tag_filter", "wrong place")  # typed, then picked: a rerun may close the list
    page.keyboard.press("Escape")
    expect(page.get_by_text("1 of 2 wrong predictions carry the chosen tags.")).to_be_visible()
    expect(page.locator(widget_class("ev_tag_export"))).to_be_visible()
    assert main(["eval", "tags", "--run", "a", "--workspace", str(server["workspace"]), "--json"]) == 0
    assert [row["tag"] for row in json.loads(capsys.readouterr().out)["tags"]] == ["wrong place"]
