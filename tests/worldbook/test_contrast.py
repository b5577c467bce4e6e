"""Induction and review: what sets a rule's counterexamples apart, and effects that belong to a form."""

from __future__ import annotations

from worldsmith.traces import Action, Episode, Observation, Turn
from worldsmith.worldbook import Condition, Evidence, Rule, RuleProvenance, RuleStatus, build_worldbook
from worldsmith.worldbook.rule_replay import review_rules


def _mv(index: int, destination: str, observation: str) -> Evidence:
    return Evidence(turn_id=f"e{index}#0", action="mv", arguments={"source": "a.txt", "destination": destination},
                    action_text=f"mv a.txt {destination}", observation=observation)


def test_a_rule_is_narrowed_by_the_shape_of_an_argument_when_no_single_value_explains_its_failures() -> None:
    renames = [_mv(i, name, f"moved to {name}") for i, name in enumerate(["b.txt", "c.md", "d.csv"])]
    into = [_mv(10 + i, name, f"moved to {name}/a.txt") for i, name in enumerate(["docs", "archive", "tmp"])]
    rule = Rule(id="mv.rename", action="mv", template="moved to {arg.destination}", support=3)
    [reviewed] = review_rules([rule], [*renames, *into])
    assert reviewed.status == RuleStatus.SUPPORTED
    [condition] = reviewed.conditions
    assert condition.arg == "destination" and condition.op == "matches"
    assert "shape" not in reviewed.description and "sets the counterexamples apart" in reviewed.description


def _take_rules(games: dict[str, list[tuple[str, str]]]) -> dict[str, Rule]:
    """The `take` rules (by template) of a book built from one text-command episode per game."""
    episodes = [Episode(id=f"e{index}", task_id=game, turns=[
        Turn(index=i, action=Action(name=text.split()[0], arguments={"text": text.split(" ", 1)[1]}
                                    if " " in text else {}, raw=text), observation=Observation(text=obs))
        for i, (text, obs) in enumerate(steps)]) for index, (game, steps) in enumerate(games.items())]
    book = build_worldbook(episodes, name="inv").book
    return {rule.template: rule for rule in book.rules if rule.action == "take"}


def test_an_inventory_effect_survives_moves_of_other_things_and_failures_add_nothing() -> None:
    take = _take_rules({f"game{i}": [
        ("inventory", "You are carrying nothing."), (f"take {fruit}", f"You take the {fruit}."),
        ("take unicorn", "You can't see any such thing."), ("put lamp on table", "You put the lamp down."),
        ("inventory", f"You are carrying: a {fruit}.")] for i, fruit in enumerate(["apple", "pear", "plum", "fig"])})
    assert [e.op for e in take["You take the {arg.object}."].effects] == ["append"]  # a `put` did not void it
    assert take["You can't see any such thing."].effects == []  # that form's turns took nothing


def test_a_negated_enumeration_is_an_empty_list() -> None:
    from worldsmith.worldbook.facts import find_lists

    [found] = find_lists("You are not carrying anything.")
    assert found.items == [] and found.text == "anything"
    assert [f.items for f in find_lists("You don't see anything here. On the desk 1, you see a pen 1.")] == [[], ["pen 1"]]


def test_a_constant_record_seen_for_one_entity_is_keyed_by_that_entity() -> None:
    def get(index: int, user: str) -> Evidence:
        return Evidence(turn_id=f"e{index}#0", action="get_user_details", arguments={"user_id": user},
                        action_text=f"get_user_details({user})", observation=f'{{"name": "{user.title()}"}}')

    evidence = [get(0, "mia"), get(1, "mia"), get(2, "mia"), get(3, "noah"), get(4, "ava")]
    rule = Rule(id="profile", action="get_user_details", template='{{"name": "Mia"}}', support=3,
                provenance=RuleProvenance(supporting=["e0#0", "e1#0", "e2#0"]))
    [reviewed] = review_rules([rule], evidence)
    assert reviewed.conditions == [Condition(arg="user_id", op="eq", value="mia")]
    assert reviewed.status == RuleStatus.SUPPORTED and reviewed.counterexamples == []  # it answers Mia only


def test_a_rule_shadowed_in_review_is_checked_once_it_would_answer_alone() -> None:
    def verify(index: int, passport: str, ok: bool) -> Evidence:
        answer = '{"verification_status": true}' if ok else '{"verification_status": false}'
        return Evidence(turn_id=f"e{index}#0", action="verify", arguments={"passport": passport},
                        action_text=f"verify({passport})", observation=answer)

    evidence = [verify(i, f"US{i}", True) for i in range(4)] + [verify(10 + i, f"FR{i}", False) for i in range(3)]
    rules = [Rule(id="ok", action="verify", template='{{"verification_status": true}}', support=4),
             Rule(id="refused", action="verify", template='{{"verification_status": false}}', support=3)]
    reviewed = {rule.id: rule for rule in review_rules(rules, evidence)}
    # `ok` answered every turn in review and failed on the refusals; `refused` was never chosen there, but alone
    # it would answer the accepted passports wrongly: neither may execute unconditioned
    assert reviewed["ok"].status == reviewed["refused"].status == RuleStatus.CONFLICTED
    assert len(reviewed["refused"].counterexamples) == 4


def test_every_one_of_many_shadowed_constant_forms_is_checked() -> None:
    """Five products' records, each a constant form with the id slotted: each is chosen in turn as the one before
    it is demoted, and none may stay supported unchecked (a round cap once left the fourth answering every id)."""
    names = ["Boots", "Clock", "Mat", "Lamp", "Kettle"]

    def get(index: int, product: int) -> Evidence:
        return Evidence(turn_id=f"e{index}#0", action="get_product", arguments={"product_id": f"P-{product}{index}"},
                        action_text=f"get_product(P-{product}{index})",
                        observation=f'{{"product_id": "P-{product}{index}", "name": "{names[product]}"}}')

    evidence = [get(10 * product + i, product) for product in range(5) for i in range(3)]
    rules = [Rule(id=f"r{product}", action="get_product", support=3,
                  template=f'{{{{"product_id": "{{arg.product_id}}", "name": "{names[product]}"}}}}')
             for product in range(5)]
    reviewed = review_rules(rules, evidence)
    assert [rule.status for rule in reviewed] == [RuleStatus.CONFLICTED] * 5


def test_an_inventory_never_shown_before_a_take_starts_empty() -> None:
    [take] = _take_rules({f"game{i}": [(f"take {fruit}", f"You take the {fruit}."),
                                       ("inventory", f"You are carrying: a {fruit}.")]
                          for i, fruit in enumerate(["apple", "pear", "plum"])}).values()
    assert [(e.op, e.path) for e in take.effects] == [("append", "world.inventory")]


def test_a_read_that_names_the_member_does_not_void_a_later_confirmation() -> None:
    [take] = _take_rules({f"game{i}": [(f"take {fruit}", f"You take the {fruit}."), (f"examine {fruit}", f"A fine {fruit}."),
                                       ("inventory", f"You are carrying: a {fruit}.")]
                          for i, fruit in enumerate(["apple", "pear", "plum"])}).values()
    assert [(e.op, e.path) for e in take.effects] == [("append", "world.inventory")]


def test_a_list_form_is_narrowed_to_a_non_empty_list_when_its_failures_showed_it_empty() -> None:
    def inventory(index: int, observation: str) -> Evidence:
        return Evidence(turn_id=f"e{index}#0", action="inventory", action_text="inventory", observation=observation)

    evidence = [inventory(i, f"You are carrying: a {fruit}.") for i, fruit in enumerate(["pear", "plum", "fig"])]
    evidence += [inventory(10 + i, "You are not carrying anything.") for i in range(2)]
    rule = Rule(id="carrying", action="inventory", template="You are carrying: {world.inventory}.", support=3)
    [reviewed] = review_rules([rule], evidence)
    assert Condition(path="world.inventory", op="ne", value=[]) in reviewed.conditions
