"""The curation loop on the Worldbook page (AppTest): choose the held-out split once, edit a rule's template,
see the paired delta with the broken turns linked into Traces; undo shows them fixed; a leaking split is refused."""

from __future__ import annotations

from pathlib import Path

from heldout_support import BOOK, DATASET, loop_workspace
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, show_tab, shown

from workbench.worldbook.rule_editor import editor_keys
from worldsmith.worldbook import WorldbookStore

PAGE = REPO / "pages" / "worldbook.py"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def open_page() -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    return no_exception(at.switch_page(str(PAGE)).run())


def markdown(at: AppTest) -> str:
    return shown("\n".join(str(m.value) for m in at.markdown))


def flip_links(at: AppTest) -> list[str]:
    return [str(link.proto.label) + " " + str(link.proto.query_string) for link in at.get("page_link")
            if str(link.proto.label).startswith(("broken", "fixed"))]


def test_an_edit_shows_its_held_out_delta_and_undo_the_reverse(empty_root: Path) -> None:
    rule_id = loop_workspace(empty_root)
    store = WorldbookStore(empty_root / "worldbooks")
    first = store.head(BOOK)
    at = open_page()
    assert at.selectbox(key="wb_heldout_dataset").value == DATASET  # the book's source dataset
    no_exception(at.selectbox(key="wb_heldout_split").set_value("test").run())
    assert at.query_params["heldout_split"] in ("test", ["test"])
    assert any("first version" in str(c.value) for c in at.caption)
    at.selectbox(key="wb_rule").set_value(rule_id).run()
    at.text_area(key=editor_keys(rule_id, first).template).input("You go nowhere.").run()
    no_exception(at.button(key=editor_keys(rule_id, first).save).click().run())
    no_exception(at.button(key="wb_save_anyway").click().run())  # the guard holds back a rule breaking its evidence
    text = markdown(at)
    assert "Held-out delta of" in text and "exact match" in text and "go: exact match" in text
    assert "**0 fixed," in text and "broken** held-out turns" in text
    broken = flip_links(at)
    assert broken and all(link.startswith("broken") for link in broken)
    assert all(f"dataset={DATASET}" in link and "turn=" in link for link in broken)
    diffs = [e.proto.body for e in at.get("html") if "ws-diff" in e.proto.body]  # what the edit changed, per turn
    assert diffs and all("what the edit changed (before → after)" in diff for diff in diffs)
    assert "<ins class='ws-diff-ins' title='only in the after'>go nowhere.</ins>" in diffs[0]  # 'You' was there
    source = shown(next(str(c.value) for c in at.caption if str(c.value).startswith("Produced by")))
    for part in ("method harness", "model none", f"dataset {DATASET}", "split test", "paired turns", f"run {BOOK}: content "):
        assert part in source, (part, source)  # what produced the delta's numbers
    show_tab(at, "History")
    no_exception(at.button(key="wb_undo").click().run())
    fixed = flip_links(at)
    assert len(fixed) == len(broken) and all(link.startswith("fixed") for link in fixed)


def test_a_split_the_book_was_built_from_is_refused(empty_root: Path) -> None:
    loop_workspace(empty_root)
    at = open_page()
    no_exception(at.selectbox(key="wb_heldout_split").set_value("train").run())
    assert any("refused" in str(e.value) and "leak" in str(e.value) for e in at.error)
    assert not any("Held-out delta" in str(m.value) for m in at.markdown)


def test_breaking_a_supported_rule_warns_before_saving(empty_root: Path) -> None:
    rule_id = loop_workspace(empty_root)
    store = WorldbookStore(empty_root / "worldbooks")
    first = store.head(BOOK)
    at = open_page()
    at.selectbox(key="wb_rule").set_value(rule_id).run()
    at.text_area(key=editor_keys(rule_id, first).template).input("You go nowhere.").run()
    no_exception(at.button(key=editor_keys(rule_id, first).save).click().run())
    warning = shown("\n".join(str(w.value) for w in at.warning))
    assert "fail its own evidence" in warning and "→ 0/" in warning
    assert store.head(BOOK) == first  # nothing saved yet
    no_exception(at.button(key="wb_save_cancel").click().run())
    assert not any("own evidence" in str(w.value) for w in at.warning) and store.head(BOOK) == first
    no_exception(at.button(key=editor_keys(rule_id, first).save).click().run())
    no_exception(at.button(key="wb_save_anyway").click().run())
    head = store.head(BOOK)
    assert head != first and store.load(BOOK).rule(rule_id).template == "You go nowhere."
    assert "saved despite" in store.info(BOOK, head).message


def test_any_two_versions_compare_word_by_word(empty_root: Path) -> None:
    rule_id = loop_workspace(empty_root)
    store = WorldbookStore(empty_root / "worldbooks")
    first = store.head(BOOK)
    template = store.load(BOOK).rule(rule_id).template
    from worldsmith.worldbook import Patch, PatchOp

    for words in ("You walk", "You stroll"):
        store.patch(BOOK, Patch(base=store.head(BOOK), message=words, ops=[PatchOp(
            op="update_rule", id=rule_id, fields={"template": template.replace("You arrive", words, 1)})]))
    at = show_tab(open_page(), "History")
    no_exception(_picker(at, "Old version").set_value(first).run())
    text = "\n".join(str(m.value) for m in at.markdown)
    assert ":red-background[~~arrive~~]" in text and ":green-background[stroll]" in text
    assert "walk" not in text  # the middle version is skipped: first against the version shown

    # after an undo (a new version shown) the pickers start again from that version and its parent
    no_exception(at.button(key="wb_undo").click().run())
    head = store.head(BOOK)
    assert _picker(at, "New version").value == head
    assert _picker(at, "Old version").value == store.info(BOOK, head).parent


def test_a_status_only_edit_is_a_change_not_zero_templates() -> None:
    from workbench.worldbook.version_compare import other_rule_changes
    from worldsmith.worldbook import Rule, RuleStatus, Worldbook, diff_worldbooks

    rule = Rule(id="go.r1", action="go", template="You arrive at {arg.target}.", status=RuleStatus.SUPPORTED)
    before = Worldbook(name="b", rules=[rule])
    after = Worldbook(name="b", rules=[rule.model_copy(update={"status": RuleStatus.DEPRECATED, "priority": 2})])
    assert other_rule_changes(diff_worldbooks(before, after), set()) == [
        {"rule": "go.r1", "field": "priority", "before": "0", "after": "2"},
        {"rule": "go.r1", "field": "status", "before": "supported", "after": "deprecated"}]
    moved = Worldbook(name="b", rules=[rule.model_copy(update={"template": "You reach {arg.target}."})])
    assert other_rule_changes(diff_worldbooks(before, moved), {"go.r1"}) == []  # shown word by word instead


def _picker(at, label: str):
    return next(box for box in at.selectbox if box.label == label)
