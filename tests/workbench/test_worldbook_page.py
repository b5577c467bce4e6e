"""The Worldbook page under AppTest: open a rule, follow its provenance into Traces, demote it, undo."""

from __future__ import annotations

from pathlib import Path

from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, show_tab

from worldsmith.worldbook import Rule, RuleProvenance, RuleStatus, Worldbook, WorldbookStore

PAGE = REPO / "pages" / "worldbook.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    return no_exception(at.switch_page(str(PAGE)).run())


def test_empty_workspace_says_how_to_make_one(empty_root: Path) -> None:
    at = open_page()
    assert any("No worldbooks" in str(i.value) for i in at.info)


def test_demote_a_rule_then_undo(empty_root: Path) -> None:
    store = WorldbookStore(empty_root / "worldbooks")
    rules = [
        Rule(
            id="take-ok",
            action="take",
            template="You pick up the {arg.object}.",
            status=RuleStatus.SUPPORTED,
            support=3,
            provenance=RuleProvenance(supporting=["ep-1#2"], contradicting=["ep-2#0"]),
        ),
        Rule(id="look", action="look", template="You are in {surface.room}."),
    ]
    first = store.save(Worldbook(name="kitchen", rules=rules), sources=[{"dataset": "samples"}]).version
    at = open_page()
    table = next(df.value for df in at.dataframe if "status" in df.value.columns)
    assert list(table["id"]) == ["take-ok", "look"]
    at.selectbox(key="wb_rule").set_value("take-ok").run()
    links = [str(link.proto.page) + "?" + str(link.proto.query_string) for link in at.get("page_link")]
    assert any("turn=ep-1%232" in link and "dataset=samples" in link for link in links), links
    assert any("turn=ep-2%230" in link for link in links), links
    assert at.button(key="wb_set_conflicted").disabled  # a status change needs a reason
    at.text_input(key="wb_status_reason:take-ok").input("fails on locked doors").run()
    no_exception(at.button(key="wb_set_conflicted").click().run())
    assert any("now conflicted" in str(s.value) for s in at.success)
    assert store.info("kitchen", store.head("kitchen")).message == "take-ok: conflicted: fails on locked doors"
    head = store.head("kitchen")
    assert head != first and store.info("kitchen", head).parent == first
    assert store.load("kitchen").rule("take-ok").status == RuleStatus.CONFLICTED
    assert store.load("kitchen", first).rule("take-ok").status == RuleStatus.SUPPORTED  # the old version is intact
    show_tab(at, "History")
    no_exception(at.button(key="wb_undo").click().run())
    assert store.load("kitchen").rule("take-ok").status == RuleStatus.SUPPORTED
    assert len(store.history("kitchen")) == 3


def test_the_routes_tab_shows_which_source_answers_each_action(empty_root: Path) -> None:
    from helpers import sample_episodes
    from worldsmith.sim.route_learning import build_simulator_book

    book = build_simulator_book(sample_episodes("alfworld_expert"), name="alf").book
    version = WorldbookStore(empty_root / "worldbooks").save(book, sources=[{"dataset": "alf", "split": None}]).version
    at = show_tab(open_page(), "Routes")
    routes = next(df.value for df in at.dataframe if "wins" in df.value.columns)
    assert {"take", "*"} <= set(routes["action"]) and "rule" in set(routes["source"])
    assert any("held-out turns: 5 cross" in str(c.value) and "folds" in str(c.value) for c in at.caption)
    sources = [str(c.value).replace("\\", "") for c in at.caption if str(c.value).startswith("Produced by")]
    assert (f"Produced by: method harness route table (5 cross-fitted folds) · model unknown · dataset alf · "
            f"split all · n {book.routes.turns} turns · run alf@{version}") in sources, sources


def _book_with_evidence(root: Path) -> None:
    """A worldbook over the bundled ALFWorld expert trajectories, its source dataset imported as `alf`."""
    from helpers import sample_episodes
    from worldsmith.sim.route_learning import build_simulator_book
    from worldsmith.workspace import Workspace

    Workspace(root).ingest([REPO / "data_samples" / "collected" / "alfworld_expert.jsonl"], "alf")
    book = build_simulator_book(sample_episodes("alfworld_expert"), name="alf").book
    WorldbookStore(root / "worldbooks").save(book, sources=[{"dataset": "alf"}])


def test_the_open_rule_and_the_filters_live_in_the_url(empty_root: Path) -> None:
    _book_with_evidence(empty_root)
    at = open_page()
    at.multiselect(key="wb_f_action").set_value(["take"]).run()
    table = next(df.value for df in at.dataframe if "status" in df.value.columns)
    assert set(table["action"]) == {"take"}
    rule_id = str(table["id"].iloc[0])
    # the browser writes a bound widget's value into the URL (tests/workbench/test_browser_curation.py checks
    # that in Chromium); here: a session opened on such a URL (a shared link, or Back) restores them all
    again = AppTest.from_file(str(APP), default_timeout=60)
    again.query_params.update({"wb_name": "alf", "wb_rule": rule_id, "wb_f_action": "take"})
    no_exception(again.run().switch_page(str(PAGE)).run())
    assert again.selectbox(key="wb_rule").value == rule_id
    assert again.multiselect(key="wb_f_action").value == ["take"]


def test_an_evidence_turn_previews_in_place(empty_root: Path) -> None:
    _book_with_evidence(empty_root)
    at = open_page()
    book = WorldbookStore(empty_root / "worldbooks").load("alf")
    rule = next(r for r in book.supported_rules() if r.action == "take" and r.provenance.supporting)
    no_exception(at.selectbox(key="wb_rule").set_value(rule.id).run())
    turn_id = rule.provenance.supporting[0]
    preview = next(e for e in at.expander if e.label.replace("\\", "") == turn_id)
    assert not preview.code and preview.get("page_link")  # drawn once opened (it costs the browser); linked at once
    at.session_state[f"wb_turns:Rule:{rule.id}:Supporting turns:{turn_id}"] = True  # the user opens it
    no_exception(at.run())
    preview = next(e for e in at.expander if e.label.replace("\\", "") == turn_id)
    from worldsmith.workspace import Workspace

    turn = Workspace(empty_root).dataset("alf").turn(turn_id)
    assert any(f"`{turn.action.name}`" in str(m.value) for m in preview.markdown)
    codes = [str(c.value) for c in preview.code]
    assert codes[0].startswith("{") and turn.observation.text.strip() in codes[1], codes


def test_clicking_a_rule_row_opens_the_rule() -> None:
    from unittest import mock

    from workbench.worldbook import rule_table

    rules = [Rule(id="a", action="take", template="x"), Rule(id="b", action="go", template="y")]
    state: dict = {}
    event = mock.Mock(selection=mock.Mock(rows=[1]))
    with mock.patch.object(rule_table, "st") as st:
        st.session_state = state
        st.dataframe.return_value = event
        rule_table.render_rule_table(rules)
    assert state[rule_table.RULE_KEY] == "b"
    st.rerun.assert_called_once()


def test_back_onto_a_traces_links_entry_restores_the_remembered_place(empty_root: Path) -> None:
    """Streamlit pushes a page link's parameters onto the current path first: Back lands on
    worldbook?dataset=...&turn=...; the page puts its remembered rule and filters back instead."""
    _book_with_evidence(empty_root)
    at = open_page()
    at.multiselect(key="wb_f_action").set_value(["take"]).run()
    rule_id = str(next(df.value for df in at.dataframe if "status" in df.value.columns)["id"].iloc[0])
    no_exception(at.selectbox(key="wb_rule").set_value(rule_id).run())
    at.query_params.update({"dataset": "alf", "turn": "x#1"})
    no_exception(at.run())
    assert "dataset" not in at.query_params and "turn" not in at.query_params
    assert at.selectbox(key="wb_rule").value == rule_id
    assert at.multiselect(key="wb_f_action").value == ["take"]


def test_a_followed_rule_link_gives_way_to_the_pages_own_parameters(empty_root: Path) -> None:
    """worldbook?book=B&rule=R opens B; the URL then says wb_name=B (what Back returns to), not the link; the same
    link followed again after choosing another book (and another tab) opens B again, on its rule."""
    store = WorldbookStore(empty_root / "worldbooks")
    for name in ("alpha", "beta"):
        rule = Rule(id=f"{name}.r1", action="go", template="You go.", status=RuleStatus.SUPPORTED, support=2)
        store.save(Worldbook(name=name, rules=[rule]))
    at = no_exception(AppTest.from_file(str(APP), default_timeout=60).run())
    at.query_params.update({"book": "beta", "rule": "beta.r1"})
    no_exception(at.switch_page(str(PAGE)).run())
    assert at.selectbox(key="wb_name").value == "beta" and at.selectbox(key="wb_rule").value == "beta.r1"
    assert "book" not in at.query_params and "rule" not in at.query_params
    no_exception(at.selectbox(key="wb_name").set_value("alpha").run())
    assert at.selectbox(key="wb_name").value == "alpha"  # the widget rules once the link is followed
    show_tab(at, "History")
    assert "wb_rule" not in [box.key for box in at.selectbox]  # only the open tab is drawn
    at.query_params.update({"book": "beta", "rule": "beta.r1"})  # the same link, followed again
    no_exception(at.run())
    assert at.selectbox(key="wb_name").value == "beta" and at.selectbox(key="wb_rule").value == "beta.r1"
    assert at.session_state["wb_tab"] == "Rules"
