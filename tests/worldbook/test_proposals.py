"""Proposed patches: each kind on hand-made rules and turns, verified by replaying the patched book."""

from __future__ import annotations

from worldsmith.worldbook import Evidence, Rule, RuleStatus, Worldbook, check_rule, propose_patches
from worldsmith.worldbook.proposal_forms import heldout_effect
from worldsmith.worldbook.store import apply_ops


def _turn(episode: str, index: int, action: str, argument: str | None, observation: str) -> Evidence:
    arguments = {"object": argument} if argument else {}
    return Evidence(turn_id=f"{episode}#{index}", action=action, arguments=arguments,
                    action_text=f"{action} {argument or ''}".strip(), observation=observation)


def _opens(prefix: str = "e") -> list[Evidence]:
    """Doors open; the safe is locked."""
    return [_turn(f"{prefix}1", 0, "open", "door 1", "You open the door 1."),
            _turn(f"{prefix}1", 1, "open", "safe 1", "The safe 1 is locked."),
            _turn(f"{prefix}2", 0, "open", "door 2", "You open the door 2."),
            _turn(f"{prefix}2", 1, "open", "safe 1", "The safe 1 is locked."),
            _turn(f"{prefix}3", 0, "open", "box 1", "You open the box 1.")]


_OPEN = Rule(id="open.r1", action="open", template="You open the {arg.object}.", status=RuleStatus.SUPPORTED,
             support=3)
_LOCKED = Rule(id="open.r2", action="open", template="The {arg.object} is locked.", status=RuleStatus.SUPPORTED,
               support=2)


def _applied(book: Worldbook, proposal_ops: list) -> Worldbook:
    return apply_ops(book, proposal_ops)


def test_a_condition_hands_the_failed_turns_to_the_rule_that_fits_them() -> None:
    book = Worldbook(name="doors", rules=[_OPEN, _LOCKED], evidence=_opens())
    assert check_rule(book, _OPEN).failed == 2
    proposals = [p for p in propose_patches(book, "open.r1") if p.kind == "condition"]
    assert proposals, "a condition separates the safe from the doors"
    first = proposals[0]
    [op] = first.patch.ops
    assert op.op == "update_rule" and op.id == "open.r1"
    assert op.fields["conditions"] == [{"path": None, "arg": "object", "op": "ne", "value": "safe 1"}]
    assert first.fixes == ["e1#1", "e2#1"] and (first.failed_before, first.failed_after) == (2, 0)
    assert any(line.startswith("+ open.r1.conditions") and "safe 1" in line for line in first.diff)
    after = _applied(book, first.patch.ops)
    assert check_rule(after, after.rule("open.r1")).failed == 0


def test_a_split_adds_a_rule_for_the_failed_turns_when_no_other_rule_fits_them() -> None:
    book = Worldbook(name="doors", rules=[_OPEN], evidence=_opens())
    proposals = propose_patches(book, "open.r1")
    assert {p.kind for p in proposals} == {"split"}, "nothing else answers the safe, so narrowing alone fixes none"
    split = proposals[0]
    update, add = split.patch.ops
    assert update.op == "update_rule" and add.op == "add_rule" and add.id == "open.r1.s2"
    assert add.value["template"] == "The {arg.object} is locked."
    assert add.value["conditions"] == [{"path": None, "arg": "object", "op": "eq", "value": "safe 1"}]
    after = _applied(book, split.patch.ops)
    assert check_rule(after, after.rule("open.r1")).failed == 0
    assert check_rule(after, after.rule("open.r1.s2")).matched == 2


def _lights() -> list[Evidence]:
    """`switch` shows the light's state; `check` later says it again."""
    out = []
    for episode, (first, second) in enumerate([("off", "on"), ("off", "off"), ("on", "off")]):
        out += [_turn(f"l{episode}", 0, "switch", None, f"You switch the light {first}."),
                _turn(f"l{episode}", 1, "check", None, f"The light is {first}."),
                _turn(f"l{episode}", 2, "switch", None, f"You switch the light {second}."),
                _turn(f"l{episode}", 3, "check", None, f"The light is {second}.")]
    return out


def test_a_template_with_a_state_slot_renders_the_matched_and_the_failed_turns() -> None:
    switch = Rule(id="switch.r1", action="switch", template="You switch the light {world.light}.",
                  status=RuleStatus.SUPPORTED, support=6)
    check = Rule(id="check.r1", action="check", template="The light is off.", status=RuleStatus.CONFLICTED, support=4)
    book = Worldbook(name="lights", rules=[switch, check], evidence=_lights())
    assert check_rule(book, check).failed == 2
    templates = [p for p in propose_patches(book, "check.r1") if p.kind == "template"]
    assert templates, "the light's state, tracked from `switch`, fills the template"
    [op] = templates[0].patch.ops
    assert op.fields == {"template": "The light is {world.light}.", "status": "supported"}
    after = _applied(book, templates[0].patch.ops)
    assert check_rule(after, after.rule("check.r1")).failed == 0
    assert templates[0].failed_after == 0 and len(templates[0].fixes) == 2


def test_a_rule_without_failed_turns_gets_no_proposal() -> None:
    book = Worldbook(name="doors", rules=[_OPEN], evidence=[e for e in _opens() if "safe" not in e.observation])
    assert propose_patches(book, "open.r1") == []


def test_the_held_out_effect_counts_turns_rendered_exactly_before_and_after() -> None:
    book = Worldbook(name="doors", rules=[_OPEN], evidence=_opens())
    split = next(p for p in propose_patches(book, "open.r1") if p.kind == "split")
    effect = heldout_effect(book, _applied(book, split.patch.ops), _opens("h"), "open")
    assert (effect.turns, effect.exact_before, effect.exact_after) == (5, 3, 5)
    assert effect.fixed == ["h1#1", "h2#1"] and effect.broken == [] and effect.exact_delta == 2
