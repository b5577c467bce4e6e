"""Proposals on the Worldbook page's rule card under AppTest: propose, read the diff and held-out effect, apply."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, show_tab

from proposal_samples import BOOK, RULE, build_heldout_workspace
from worldsmith.worldbook import WorldbookStore, check_rule

PAGE = REPO / "pages" / "worldbook.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.fixture
def heldout_root(empty_root: Path) -> Path:
    return build_heldout_workspace(empty_root)


def _finished(root: Path, at: AppTest) -> AppTest:
    """Wait for the workspace's proposal jobs to end, then rerun the page (a browser's fragment would)."""
    from worldsmith.evals.proposal_jobs import list_proposals

    deadline = time.monotonic() + 300
    while any(status.state == "running" for status in list_proposals(root)):
        assert time.monotonic() < deadline, "the proposal job still runs after 300 s"
        time.sleep(0.2)
    return no_exception(at.run())


def test_a_proposal_shows_its_diff_and_held_out_effect_and_applies_as_a_new_version(heldout_root: Path) -> None:
    store = WorldbookStore(heldout_root / "worldbooks")
    first = store.head(BOOK)
    failed_before = check_rule(store.load(BOOK), store.load(BOOK).rule(RULE)).failed
    at = no_exception(AppTest.from_file(str(APP), default_timeout=60).run().switch_page(str(PAGE)).run())
    at.selectbox(key="wb_rule").set_value(RULE).run()
    no_exception(at.button(key=f"wb_prop_run_{BOOK}:{first}:{RULE}").click().run())
    _finished(heldout_root, at)
    shown = [str(m.value) for m in at.markdown]
    assert any("Held-out (`test`" in text and "template fits" in text for text in shown), shown
    sources = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    assert any(c.startswith("Produced by: method harness · model none · dataset ") and " · split test (alfworld) · n " in c
               and " paired turns of " in c and f" · run {BOOK}: content " in c for c in sources), sources
    assert any(code.value.startswith(f"- {RULE}.") for code in at.code)
    no_exception(at.button(key=f"wb_prop_apply_{first}_{RULE}_1").click().run())
    assert any("Applied the" in str(s.value) for s in at.success)
    head = store.head(BOOK)
    assert head != first and store.info(BOOK, head).parent == first
    patched = store.load(BOOK)
    assert check_rule(patched, patched.rule(RULE)).failed < failed_before
    show_tab(at, "History")
    no_exception(at.button(key="wb_undo").click().run())
    assert store.load(BOOK).rules == store.load(BOOK, first).rules


def _cluster_script() -> None:
    from workbench.worldbook.rule_proposals import render_cluster_proposals

    render_cluster_proposals("alfworld", [("open.r1", 3), ("no.such", 1)], key="ev_fx_prop_0", actions=["clean"])


def test_a_failure_cluster_proposes_fixes_for_the_rule_behind_it(heldout_root: Path) -> None:
    store = WorldbookStore(heldout_root / "worldbooks")
    head = store.head(BOOK)
    at = no_exception(AppTest.from_function(_cluster_script, default_timeout=60).run())
    assert at.selectbox(key="ev_fx_prop_0_rule").options == [
        f"{RULE} (used by 3 wrong predictions)", "clean.r1 (a tentative rule of clean)"], \
        "rules of the stored book only: those the predictions used, then those of the cluster's actions"
    no_exception(at.button(key=f"ev_fx_prop_0_run_{BOOK}:{head}:{RULE}").click().run())
    _finished(heldout_root, at)
    assert any("template fits" in str(m.value) for m in at.markdown)
    no_exception(at.button(key=f"ev_fx_prop_0_apply_{head}_{RULE}_1").click().run())
    assert store.info(BOOK, store.head(BOOK)).parent == head
    assert any("Applied the" in message for message in at.session_state["wb_notices"]), "shown above the clusters"


def test_cluster_rules_counts_the_rules_behind_wrong_predictions() -> None:
    import pandas as pd

    from worldsmith.evals.clusters import cluster_rules

    frame = pd.DataFrame({"rules": [["take.r1", "open.r1"], ["open.r1"], [], None]})
    assert cluster_rules(frame) == [("open.r1", 2), ("take.r1", 1)]
    assert cluster_rules(pd.DataFrame({"action": ["open"]})) == []


def test_a_patch_that_breaks_a_held_out_turn_or_lowers_a_metric_is_marked() -> None:
    from workbench.worldbook.rule_proposals import lowers_fidelity
    from worldsmith.evals.heldout import FlippedTurn, HeldOutDelta, MetricDelta

    def delta(diff: float, flipped: list[FlippedTurn]) -> HeldOutDelta:
        moved = MetricDelta(before=0.5, after=0.5 + diff, diff=diff, low=min(diff, 0.0), high=max(diff, 0.0), n=4)
        return HeldOutDelta.model_construct(flipped=flipped, by_action={"use": {"token_f1": moved}})

    broken = FlippedTurn(kind="broken", episode_id="e", turn=1, action="use", action_text="use x", before="a",
                         after="b", target="a")
    assert lowers_fidelity(delta(-0.1, []), "use") and lowers_fidelity(delta(0.0, [broken]), "use")
    assert not lowers_fidelity(delta(0.2, []), "use") and not lowers_fidelity(None, "use")


def _ruleless_cluster_script() -> None:
    import pandas as pd

    from workbench.evaluate.failures import _no_rule_reason
    from workbench.worldbook.rule_proposals import render_cluster_proposals
    from worldsmith.evals.clusters import Cluster

    records = pd.DataFrame({"action": ["refund_order {}"] * 2, "prediction": ["", ""],
                            "source": ["nearest_evidence"] * 2, "unseen_action": [True, True]})
    cluster = Cluster(label=0, size=2, top_actions=[("refund_order", 2)], example="", records=records)
    render_cluster_proposals("alfworld", [], key="ev_fx_prop_1", actions=["refund_order"],
                             reason=_no_rule_reason(cluster))


def test_a_cluster_no_rule_is_behind_says_why_and_what_fixes_it(heldout_root: Path) -> None:
    at = no_exception(AppTest.from_function(_ruleless_cluster_script, default_timeout=60).run())
    [caption] = [str(c.value) for c in at.caption]
    assert "no rule to propose a fix for" in caption
    assert "refund\\_order never appears in the book's construction data" in caption
    assert "build the book from logs that call it" in caption


def test_proposals_run_in_the_background_and_outlive_leaving_the_page(heldout_root: Path) -> None:
    """Propose, leave for Traces while it runs (the sidebar links back to it), come back: the proposals are there
    without pressing the button again; the job is the one the library and `worldsmith jobs list` see."""
    from workbench.common.text import md_escape
    from worldsmith.cli.main import main
    from worldsmith.evals.proposal_jobs import ProposalLaunch, list_proposals, proposal_job_name

    store = WorldbookStore(heldout_root / "worldbooks")
    head = store.head(BOOK)
    at = no_exception(AppTest.from_file(str(APP), default_timeout=60).run().switch_page(str(PAGE)).run())
    at.selectbox(key="wb_rule").set_value(RULE).run()
    no_exception(at.button(key=f"wb_prop_run_{BOOK}:{head}:{RULE}").click().run())
    at = no_exception(at.run())
    [status] = list_proposals(heldout_root)  # running now: it ran through the rerun above too
    assert status.name == proposal_job_name(ProposalLaunch(BOOK, head, RULE)) and status.rule_id == RULE
    if status.state == "running":  # a Python process starting takes longer than these reruns, but do not rely on it
        assert at.get("progress"), "the job's progress is shown while it runs"
        assert at.button(key=f"wb_prop_run_{BOOK}:{head}:{RULE}").disabled, "one job at a time"
        at = no_exception(at.switch_page(str(REPO / "pages" / "traces.py")).run())
        labels = [link.label for link in at.sidebar.get("page_link")]
        assert any(label.startswith(f"Proposing fixes for {md_escape(RULE)}: ") for label in labels), labels
    at.session_state["wb_proposals"] = {}  # what a new session (a reload) starts from: the job is found again
    at = _finished(heldout_root, at.switch_page(str(PAGE)))
    at.selectbox(key="wb_rule").set_value(RULE).run()
    assert any("template fits" in str(m.value) for m in at.markdown), "shown again without a new press"
    assert any(code.value.startswith(f"- {RULE}.") for code in at.code)
    [status] = list_proposals(heldout_root)
    assert status.state == "finished" and status.fraction == 1.0 and status.report() is not None
    assert status.report().rule_id == RULE and len(status.report().proposals) >= 1
    assert main(["jobs", "list", "--workspace", str(heldout_root)]) == 0
