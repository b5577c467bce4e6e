"""The rule fast path as an answer source (`rules`): the book's executable rule that holds renders the answer.

Every executable rule of the action is checked against the state before the turn (no retrieval limit can hide
one); equal-rank rules that both hold with different templates are recorded as conflicts on the proposal. A rule
that holds but whose template needs state not known yet answers nothing, and says so in the audit. The state after
a turn is read back by the harness itself (`worldbook.rule_replay.observe_turn`), so this source keeps no episode state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.engine import render
from worldsmith.worldbook.facts import ListFormat
from worldsmith.worldbook.model import Rule
from worldsmith.worldbook.rule_replay import select_rule

__all__ = ["RuleSource"]


class RuleSource:
    """Answers with the template of the rule `select_rule` picks among the action's executable rules."""

    def __init__(self, rules: Mapping[str, Sequence[Rule]], formats: Mapping[str, ListFormat]) -> None:
        self.rules = rules
        self.formats = formats

    def reset(self, opening: str) -> None:
        """Nothing to forget: rules read the harness's state."""

    def observe(self, step: Step, observation: str) -> None:
        """Nothing to remember: the harness reads the state back through the rules."""

    def propose(self, step: Step) -> list[CandidateAnswer]:
        candidates = [rule for rule in self.rules.get(step.name, []) if rule.executable]
        selection = select_rule(candidates, step.arguments, step.state)
        rule = selection.rule
        if rule is None:
            return []
        observation = render(rule.template, step.arguments, step.state, self.formats)
        if observation is None:
            step.note(f"rule {rule.id} applies but its template needs state not known yet")
            return []
        proposal = CandidateAnswer("rule", observation, outcome=rule.outcome, rule=rule.id, effects=list(rule.effects),
                            form=rule.template, conflicts=list(selection.conflicts))
        if selection.route == "assumed":
            proposal.notes.append("conditions of a more specific rule are unknown here: assumed")
        return [proposal]

    def snapshot(self) -> dict[str, Any]:
        return {}


@answer_source("rules", answers=(Answer("rule", route="fast_path", rank=10, trusted=True),))
def _rules(context: SourceContext) -> AnswerSource:
    """The book's executable rules (the fast path)."""
    return RuleSource(context.rules, context.formats)
