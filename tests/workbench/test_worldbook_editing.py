"""Editing a worldbook on its page (AppTest): a rule's template and effects through the data_editor,
invalid and stale edits, new rules and notes, the schema browser, sorting; plus the pure edit logic."""

from __future__ import annotations

from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from workbench_support import APP, REPO, show_tab, shown

from workbench.worldbook.rule_editor import DRAFTS, editor_keys
from workbench.worldbook.rule_edits import (
    RuleDraft,
    RuleEditError,
    apply_editor_state,
    changed_fields,
    new_item_id,
    parse_cell,
    rows_to_conditions,
    show_cell,
)
from workbench.worldbook.rule_table import RuleFilter, select_rules
from worldsmith.worldbook import (
    Condition,
    Effect,
    Evidence,
    Note,
    Patch,
    PatchOp,
    Rule,
    RuleProvenance,
    RuleStatus,
    StatePath,
    StateSchema,
    Worldbook,
    WorldbookStore,
)
from worldsmith.worldbook.model import ActionSchema, ActionSpec, ArgumentSpec, Invariant, ObservationContract

PAGE = REPO / "pages" / "worldbook.py"
NAME = "kitchen"


def no_exception(at: AppTest) -> AppTest:
    assert not at.exception, [e.value for e in at.exception]
    return at


def kitchen() -> Worldbook:
    take = Rule(id="take-ok", action="take", template="You pick up the {arg.object}.", status=RuleStatus.SUPPORTED,
                support=3, confidence=0.75,
                conditions=[Condition(path="world.location.{arg.object}", op="eq", value="{session.room}")],
                effects=[Effect(op="append", path="world.inventory", value="{arg.object}")],
                counterexamples=["ep-3#4"],
                provenance=RuleProvenance(supporting=["ep-1#2"], contradicting=["ep-2#0"]))
    look = Rule(id="look", action="look", template="You are in {surface.room}.", support=5, confidence=0.5)
    return Worldbook(
        name=NAME, rules=[take, look], notes=[Note(id="note-1", kind="format", text="Objects are lower case.")],
        action_schema=ActionSchema(actions=[ActionSpec(name="take", aliases=["pick up"],
                                                       arguments=[ArgumentSpec(name="object")],
                                                       pattern=r"^take (?P<object>.+)$", examples=["take apple"])]),
        state_schema=StateSchema(paths=[StatePath(path="world.inventory", type="array"),
                                        StatePath(path="session.room", type="string", mutable=False)]),
        contracts=[ObservationContract(action="take", template="You pick up the {arg.object}.")],
        invariants=[Invariant(id="one-room", description="The agent is in one room.",
                              conditions=[Condition(path="session.room", op="exists")])],
    )


def setup_book(root: Path) -> tuple[WorldbookStore, str]:
    store = WorldbookStore(root / "worldbooks")
    return store, store.save(kitchen(), author="test", sources=[{"dataset": "samples"}]).version


def open_rule(rule_id: str = "take-ok") -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=60).run()
    at = no_exception(at.switch_page(str(PAGE)).run())
    return no_exception(at.selectbox(key="wb_rule").set_value(rule_id).run())


def errors(at: AppTest) -> str:
    return "\n".join(shown(e.value) for e in at.error)


# ----------------------------------------------------------------------------- the page


def test_edit_template_and_effect_makes_one_new_version(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    keys = editor_keys("take-ok", first)
    editor = at.data_editor(key=keys.effects)
    assert list(editor.value["path"]) == ["world.inventory"] and editor.editing_mode == "dynamic"
    at.text_area(key=keys.template).input("You take the {arg.object}.")
    at.session_state[keys.effects] = {"edited_rows": {0: {"value": '["{arg.object}", 2]'}},
                                      "added_rows": [{"op": "set", "path": "world.held", "value": "true"}],
                                      "deleted_rows": []}
    no_exception(at.button(key=keys.save).click().run())
    assert any("Saved" in str(s.value) for s in at.success), errors(at)
    head = store.head(NAME)
    info = store.info(NAME, head)
    assert head != first and info.parent == first
    assert [op["op"] for op in info.patch] == ["update_rule"]
    assert set(info.patch[0]["fields"]) == {"template", "effects"}  # only what changed
    rule = store.load(NAME).rule("take-ok")
    assert rule.template == "You take the {arg.object}."
    assert [(e.op, e.path, e.value) for e in rule.effects] == [("append", "world.inventory", ["{arg.object}", 2]),
                                                                ("set", "world.held", True)]
    assert rule.conditions == kitchen().rule("take-ok").conditions and rule.status == RuleStatus.SUPPORTED
    assert store.load(NAME, first) == kitchen().canonical()  # the old version is intact and loadable
    # the page now shows the new version, with editors keyed to it
    assert at.text_area(key=editor_keys("take-ok", head).template).value == "You take the {arg.object}."


def test_edit_a_condition_through_the_editor(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    keys = editor_keys("take-ok", first)
    at.session_state[keys.conditions] = {"edited_rows": {0: {"op": "ne", "value": "3"}},
                                         "added_rows": [{"arg": "object", "op": "exists"}], "deleted_rows": []}
    no_exception(at.button(key=keys.save).click().run())
    rule = store.load(NAME).rule("take-ok")
    assert [(c.path, c.arg, c.op, c.value) for c in rule.conditions] == [
        ("world.location.{arg.object}", None, "ne", 3), (None, "object", "exists", None)]
    assert set(store.info(NAME, store.head(NAME)).patch[0]["fields"]) == {"conditions"}


@pytest.mark.parametrize(("editor", "state", "field"), [
    ("effects", {"edited_rows": {0: {"path": "inventory"}}}, "effects.0.path"),
    ("conditions", {"edited_rows": {0: {"arg": "object"}}}, "conditions.0"),
])
def test_invalid_edit_shows_the_field_and_saves_nothing(empty_root: Path, editor: str, state: dict,
                                                        field: str) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    keys = editor_keys("take-ok", first)
    at.text_area(key=keys.template).input("changed too")
    at.session_state[getattr(keys, editor)] = {"added_rows": [], "deleted_rows": [], **state}
    no_exception(at.button(key=keys.save).click().run())
    assert field in errors(at) and "not saved" in errors(at)
    assert store.head(NAME) == first and len(store.versions(NAME)) == 1


def test_invalid_outcome_is_refused(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    keys = editor_keys("take-ok", first)
    at.text_input(key=keys.outcome).input("broken")
    no_exception(at.button(key=keys.save).click().run())
    assert "outcome" in errors(at) and store.head(NAME) == first


def test_stale_edit_is_refused_with_the_conflict(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    keys = editor_keys("take-ok", first)
    at.text_area(key=keys.template).input("mine")
    theirs = store.patch(NAME, Patch(base=first, author="someone", ops=[
        PatchOp(op="update_rule", id="take-ok", fields={"template": "theirs"})])).version
    no_exception(at.button(key=keys.save).click().run())
    assert "changed since" in errors(at) and "take-ok" in errors(at)
    assert any("changed since you opened it" in str(w.value) for w in at.warning)
    assert store.head(NAME) == theirs and store.load(NAME).rule("take-ok").template == "theirs"
    no_exception(at.button(key="wb_show_head").click().run())  # reload: the editor now shows their version
    assert at.text_area(key=editor_keys("take-ok", theirs).template).value == "theirs"


def test_edit_after_someone_changed_another_rule_keeps_both(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    keys = editor_keys("take-ok", first)
    at.number_input(key=keys.priority).set_value(4)
    theirs = store.patch(NAME, Patch(base=first, ops=[
        PatchOp(op="update_rule", id="look", fields={"status": "deprecated"})])).version
    no_exception(at.button(key=keys.save).click().run())
    assert not at.error
    book = store.load(NAME)
    assert book.rule("take-ok").priority == 4 and book.rule("look").status == RuleStatus.DEPRECATED
    assert store.info(NAME, store.head(NAME)).parent == theirs


def test_counterexamples_link_to_traces(empty_root: Path) -> None:
    setup_book(empty_root)
    at = open_rule()
    links = [str(link.proto.page) + "?" + str(link.proto.query_string) for link in at.get("page_link")]
    assert any("turn=ep-3%234" in link and "dataset=samples" in link for link in links), links
    assert any("Other counterexamples" in str(m.value) for m in at.markdown)


def test_a_counterexample_that_contradicts_is_listed_once() -> None:
    from workbench.worldbook.rule_card import counterexamples_apart

    assert counterexamples_apart(["ep-2#0", "ep-3#4", "ep-3#4"], ["ep-2#0", "ep-5#1"]) == ["ep-3#4"]
    assert counterexamples_apart(["ep-2#0"], ["ep-2#0"]) == []


def test_add_rule_and_notes(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    at.text_input(key="wb_new_rule_action").input("open")
    at.text_area(key="wb_new_rule_template").input("You open the {arg.object}.")
    no_exception(at.button(key="FormSubmitter:wb_add_rule-Add rule").click().run())
    added = store.load(NAME).rule("open-1")
    assert added.status == RuleStatus.TENTATIVE and added.template == "You open the {arg.object}."
    after_rule = store.head(NAME)
    assert after_rule != first

    show_tab(at, "Notes")
    at.selectbox(key="wb_new_note_kind").set_value("constraint")
    at.text_area(key="wb_new_note_text").input("A closed container hides its contents.")
    no_exception(at.button(key="FormSubmitter:wb_add_note-Add note").click().run())
    note = next(n for n in store.load(NAME).notes if n.id == "note-2")
    assert (note.kind, note.text) == ("constraint", "A closed container hides its contents.")
    assert store.info(NAME, store.head(NAME)).parent == after_rule
    assert store.load(NAME, after_rule).notes == kitchen().notes  # the version before is intact

    version = store.head(NAME)
    from workbench.worldbook.notes_editor import note_keys

    keys = note_keys("note-1", version)
    at.text_area(key=keys["text"]).input("Objects are written in lower case.")
    no_exception(at.button(key=keys["save"]).click().run())
    assert next(n for n in store.load(NAME).notes if n.id == "note-1").text == "Objects are written in lower case."
    no_exception(at.button(key=note_keys("note-2", store.head(NAME))["remove"]).click().run())
    assert [n.id for n in store.load(NAME).notes] == ["note-1"]
    assert len(store.history(NAME)) == 5


def test_add_rule_with_a_bad_id_saves_nothing(empty_root: Path) -> None:
    store, first = setup_book(empty_root)
    at = open_rule()
    at.text_input(key="wb_new_rule_action").input("open")
    at.text_input(key="wb_new_rule_id").input("has spaces")
    no_exception(at.button(key="FormSubmitter:wb_add_rule-Add rule").click().run())
    assert "id" in errors(at) and store.head(NAME) == first


def test_schema_browser_and_rule_sorting(empty_root: Path) -> None:
    setup_book(empty_root)
    at = show_tab(open_rule(), "Schemas")
    frames = {tuple(df.value.columns): df.value for df in at.dataframe if df.editing_mode == "read_only"}
    actions = next(f for cols, f in frames.items() if "aliases" in cols)
    assert actions.iloc[0]["action"] == "take" and "pick up" in actions.iloc[0]["aliases"]
    assert actions.iloc[0]["examples"] == "take apple" and "object" in actions.iloc[0]["arguments"]
    state = next(f for cols, f in frames.items() if "mutable" in cols)
    assert list(state["path"]) == ["world.inventory", "session.room"]
    invariants = next(f for cols, f in frames.items() if "conditions" in cols and "id" in cols)
    assert invariants.iloc[0]["conditions"] == "session.room exists"
    no_exception(at.multiselect(key="wb_s_namespaces").set_value(["session"]).run())
    state = next(df.value for df in at.dataframe if "mutable" in df.value.columns)
    assert list(state["path"]) == ["session.room"]

    def rule_ids() -> list[str]:
        return list(next(df.value for df in at.dataframe if "status" in df.value.columns)["id"])

    show_tab(at, "Rules")
    assert rule_ids() == ["look", "take-ok"]  # support 5 before 3
    no_exception(at.selectbox(key="wb_f_sort").set_value("confidence").run())
    assert rule_ids() == ["take-ok", "look"]
    no_exception(at.number_input(key="wb_f_min_support").set_value(4).run())
    assert rule_ids() == ["look"]


# ----------------------------------------------------------------------------- the edit logic


def test_cells_round_trip() -> None:
    assert [parse_cell(x) for x in ("3", "2.5", "[1, 2]", "true", "null", "open", "", None, '"3"')] == \
        [3, 2.5, [1, 2], True, None, "open", None, None, "3"]
    for value in ("3", "open", "", "{arg.object}", 3, [1, "a"], {"k": 1}, True, None, "null"):
        assert parse_cell(show_cell(value)) == value


def test_editor_state_applies_edits_then_deletions_then_additions() -> None:
    base = [{"op": "set", "path": "world.a", "value": "1"}, {"op": "delete", "path": "world.b", "value": None}]
    state = {"edited_rows": {"0": {"value": "2"}, 1: {"path": "world.c"}}, "deleted_rows": [1],
             "added_rows": [{"op": "append", "path": "world.d"}]}
    rows = apply_editor_state(base, state, ("op", "path", "value"))
    assert rows == [{"op": "set", "path": "world.a", "value": "2"},
                    {"op": "append", "path": "world.d", "value": None}]
    assert base[0]["value"] == "1"  # the editor's input is never changed
    assert apply_editor_state(base, None, ("op", "path", "value")) == base


def test_changed_fields_and_errors() -> None:
    rule = kitchen().rule("take-ok")
    draft = RuleDraft.of(rule)
    assert changed_fields(rule, draft) == {}
    draft.conditions.append({"path": None, "arg": None, "op": None, "value": None})  # a blank row is ignored
    draft.description = "why"
    assert changed_fields(rule, draft) == {"description": "why"}
    draft.effects[0]["path"] = "inventory"
    with pytest.raises(RuleEditError) as caught:
        changed_fields(rule, draft)
    assert caught.value.problems[0][0] == "effects.0.path" and "must start with" in caught.value.problems[0][1]
    assert rows_to_conditions([{"path": " ", "arg": "object", "op": "exists", "value": ""}]) == \
        [{"path": None, "arg": "object", "op": "exists", "value": None}]


def test_new_ids_do_not_clash() -> None:
    book = kitchen()
    assert new_item_id(book, "take") == "take-1"
    assert new_item_id(book.model_copy(update={"rules": [*book.rules, Rule(id="take-1", action="take")]}),
                       "take") == "take-2"
    assert new_item_id(book, "note", kind="note") == "note-2"
    assert new_item_id(book, "pick up!") == "pick-up-1"


def test_select_rules_filters() -> None:
    rules = kitchen().rules
    assert [r.id for r in select_rules(rules, RuleFilter(min_confidence=0.6))] == ["take-ok"]
    assert [r.id for r in select_rules(rules, RuleFilter(statuses=("tentative",)))] == ["look"]
    assert [r.id for r in select_rules(rules, RuleFilter(search="pick UP"))] == ["take-ok"]
    assert [r.id for r in select_rules(rules, RuleFilter(sort="id"))] == ["look", "take-ok"]


def _remember_script() -> None:
    import streamlit as st

    from workbench.worldbook.rule_editor import DRAFTS, remember_rows

    base = [{"op": "set", "path": "world.a", "value": "1"}]
    st.session_state["ed"] = {"edited_rows": {0: {"value": "[1]"}}, "added_rows": [], "deleted_rows": []}
    remember_rows("ed", base, ("op", "path", "value"))
    st.json(st.session_state[DRAFTS])


def test_on_change_handler_stores_the_edited_rows() -> None:
    at = no_exception(AppTest.from_function(_remember_script).run())
    assert at.session_state[DRAFTS] == {"ed": [{"op": "set", "path": "world.a", "value": "[1]"}]}


def test_rule_evidence_shows_the_true_counts_beside_the_cap(empty_root: Path) -> None:
    """'Supporting turns (50)' was the storage cap read as a count."""
    turns = [f"ep-1#{i}" for i in range(80)]
    rule = Rule(id="take-ok", action="take", template="You pick up the {arg.object}.",
                provenance=RuleProvenance.capped(turns[:70], turns[70:], cap=50))
    WorldbookStore(empty_root / "worldbooks").save(Worldbook(name=NAME, rules=[rule]), sources=[{"dataset": "samples"}])
    headers = [shown(m.value) for m in open_rule().markdown]
    assert "**Supporting turns** (70; the book keeps the first 50)" in headers
    assert "**Contradicting turns** (10)" in headers


def test_replay_a_rule_on_the_evidence(empty_root: Path) -> None:
    store = WorldbookStore(empty_root / "worldbooks")
    evidence = [Evidence(turn_id="ep-1#0", action="take", arguments={"object": "apple"}, action_text="take apple",
                         observation="You pick up the apple."),
                Evidence(turn_id="ep-1#1", action="take", arguments={"object": "pear"}, action_text="take pear",
                         observation="Nothing happens."),
                Evidence(turn_id="ep-2#0", action="take", arguments={"object": "cup"}, action_text="take cup",
                         observation="You pick up the cup.")]
    rule = Rule(id="take-ok", action="take", template="You pick up the {arg.object}.")  # tentative: replayed anyway
    version = store.save(Worldbook(name=NAME, rules=[rule], evidence=evidence), sources=[{"dataset": "samples"}]).version
    at = open_rule()
    assert not at.metric
    no_exception(at.button(key=f"wb_replay:{version}:take-ok").click().run())
    assert {m.label: m.value for m in at.metric} == {"turns of its action": "3", "chosen": "3", "matched": "2",
                                                     "failed": "1"}
    table = next(df.value for df in at.dataframe if "reason" in df.value.columns)
    assert dict(zip(table["turn"], table["result"], strict=True)) == {"ep-1#0": "matched", "ep-1#1": "failed",
                                                                      "ep-2#0": "matched"}
    assert table["traces"].iloc[1] == "traces?dataset=samples&turn=ep-1%231"
    links = [str(link.proto.query_string) for link in at.get("page_link")]
    assert "dataset=samples&turn=ep-1%231" in links
    no_exception(at.run())  # the result stays across reruns
    assert len(at.metric) == 4 and store.head(NAME) == version  # replaying changes nothing
