"""Review narrows a contradicted rule by what sets its counterexamples apart: a value, or an argument's shape."""

from __future__ import annotations

from worldsmith.worldbook import Evidence, Rule, RuleStatus, review_rules


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
