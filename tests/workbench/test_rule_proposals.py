"""Proposals on the Worldbook page's rule card under AppTest: propose, read the diff and held-out effect, apply."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO

from proposal_samples import BOOK, RULE, build_heldout_workspace
from worldsmith.worldbook import WorldbookStore, check_rule

PAGE = REPO / "pages" / "worldbook.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def heldout_root(empty_root: Path) -> Path:
    return build_heldout_workspace(empty_root)


def test_a_proposal_shows_its_diff_and_held_out_effect_and_applies_as_a_new_version(heldout_root: Path) -> None:
    store = WorldbookStore(heldout_root / "worldbooks")
    first = store.head(BOOK)
    failed_before = check_rule(store.load(BOOK), store.load(BOOK).rule(RULE)).failed
    at = no_exception(AppTest.from_file(str(APP), default_timeout=60).run().switch_page(str(PAGE)).run())
    at.selectbox(key="wb_rule").set_value(RULE).run()
    no_exception(at.button(key=f"wb_prop_run_{BOOK}:{first}:{RULE}").click().run())
    shown = [str(m.value) for m in at.markdown]
    assert any("Held-out (`test`" in text and "template fits" in text for text in shown), shown
    assert any(code.value.startswith(f"- {RULE}.") for code in at.code)
    no_exception(at.button(key=f"wb_prop_apply_{first}_{RULE}_1").click().run())
    assert any("Applied the" in str(s.value) for s in at.success)
    head = store.head(BOOK)
    assert head != first and store.info(BOOK, head).parent == first
    patched = store.load(BOOK)
    assert check_rule(patched, patched.rule(RULE)).failed < failed_before
    no_exception(at.button(key="wb_undo").click().run())
    assert store.load(BOOK).rules == store.load(BOOK, first).rules
