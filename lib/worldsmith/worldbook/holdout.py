"""Supported means it holds out: what a reviewed rule must show besides its review before it may execute.

The review (`rule_replay.review_rules`, the tool-rule learners) calls a rule supported when enough construction turns
fit it and none contradicts it. That is a claim about the turns it was learned from. A book's `supported` is a claim
about turns it has not seen, so the build (`book_stages` compile) keeps a reviewed-supported rule supported only when

- **its support spans at least `MIN_FAMILIES` trajectory families** (`traces.families`): five turns of one episode,
  or of several recordings of one task, show what that task does, not what the world does;
- **its template states no value one family alone showed** (`template_literals`: numbers, ids, quoted strings in
  the template's literal text that the observations of only one of its supporting families hold): amounts or ids
  hard-coded from one episode are that episode's, whatever the family count of the rest of its support;
- **held out, it was exact on at least `MIN_HELD_OUT_EXACT` of the turns it answered** in the route stage's
  cross-fitting (`RouteTable.rules`): each fold's book is built without the held-out families, and a held-out turn
  the rule (the same candidate, re-reviewed on the kept folds) answered counts once, exact or not.

A rule that answered no held-out turn although the book has a route table is demoted too: the cross-fitting held
out every family of its support at some fold and the rule, learned from the others, never answered one of those
turns (it lacked support there, another rule answered first, or its action was outside the measured sample). No
held-out evidence is not evidence that it holds out, and `supported` is the claim that it does. Without a route table
(a book built without `sim`'s route stage) nothing was held out: the third test is not applied, the other two are,
and each demotion says `held_out_answered: None`.

Effect rules (`ToolRule.kind == "effect"`) change records and answer nothing themselves, so no held-out turn is
theirs to answer: the third test does not apply to them (the reads that follow them are measured as the answers of
other sources). Every demotion is listed in `Worldbook.demotions` (rule id, families, held-out n/k, literals, the
reasons) and the build report.

A demoted rule's status is the book's honest claim; what its simulator answers is decided, as for every answer
source, by the route table's held-out record per action (`as_routed`): a write rule exact on 30 of 38 held-out turns
is tentative, and still answers where held out it beat nearest evidence (the audit says so), while a lookup table
exact on 1% loses to nearest evidence and does not.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from worldsmith.worldbook.facts import whole_word_spans
from worldsmith.worldbook.induce import episode_of
from worldsmith.worldbook.model import Demotion, Evidence, Rule, RuleStatus, Worldbook
from worldsmith.worldbook.route_table import RouteTable, RuleHeldOut
from worldsmith.worldbook.toolrules import ToolRule

__all__ = ["MIN_FAMILIES", "MIN_HELD_OUT_EXACT", "apply_holdout", "as_routed", "rule_key", "template_literals"]

MIN_FAMILIES = 3
"""Trajectory families a supported rule's supporting turns must come from."""

MIN_HELD_OUT_EXACT = 0.9
"""The share of the held-out turns a supported rule answered that it must have answered exactly."""

_SLOT = re.compile(r"\{\{|\}\}|\{[^{}]*\}")  # a slot, or an escaped brace (`engine.escape_braces`)
_PIECE = re.compile(r"\w+(?:[.,\-/:@]\w+)*")  # a word with inner punctuation: 12.50, 1,234, W-12, a@b.c
_QUOTED = re.compile(r"(?<!\w)([\"'])([^\"'\n]{1,200}?)\1(?!\w)")


def rule_key(rule: Rule | ToolRule) -> str:
    """What names one rule in every book of a build: a text rule's id (fold books re-review the build's own
    candidates, ids and all); a tool rule's id, except a precondition's, which is numbered by its learned order (an
    order a fold can change): that one is named by its test."""
    if isinstance(rule, Rule):
        return f"rule:{rule.id}"
    if rule.kind == "precondition" and rule.precondition is not None:
        p = rule.precondition
        return "tool:precondition:" + "|".join(
            [rule.tool, p.test, p.argument, p.via or "", p.kind or "", ".".join(p.path), p.other or ""])
    return f"tool:{rule.id}"


def template_literals(template: str) -> list[str]:
    """The values a template states in its literal text (slots left out): quoted strings and words holding a digit
    (amounts, counts, ids), in order, once each."""
    text = _SLOT.sub("\n", template)
    found = [match.group(2) for match in _QUOTED.finditer(text)]
    found += [piece for piece in _PIECE.findall(text) if any(c.isdigit() for c in piece)]
    return list(dict.fromkeys(value for value in found if value.strip()))


def _template(rule: Rule | ToolRule) -> str:
    if isinstance(rule, ToolRule) and rule.kind in ("query", "projection"):
        return ""  # these render records, not a template
    return rule.template


def _judge(rule: Rule | ToolRule, kind: str, families: Mapping[str, str], observations: Mapping[str, str],
           routes: RouteTable | None) -> Demotion | None:
    supporting = [turn for turn in rule.provenance.supporting if turn in observations]
    spanned = {families.get(episode_of(turn), episode_of(turn)) for turn in supporting}
    reasons: list[str] = []
    if len(spanned) < MIN_FAMILIES:
        reasons.append(f"its support spans {len(spanned)} trajectory famil{'y' if len(spanned) == 1 else 'ies'} "
                       f"(at least {MIN_FAMILIES} needed)")
    literals = []
    for value in template_literals(_template(rule)):
        showing = {families.get(episode_of(t), episode_of(t)) for t in supporting
                   if whole_word_spans(observations[t], value)}
        if len(showing) <= 1:
            literals.append(value)
    if literals:
        reasons.append(f"its template states {', '.join(map(repr, literals[:5]))}, shown by one family's "
                       "observations only")
    held: RuleHeldOut | None = None
    measured = routes is not None and not (isinstance(rule, ToolRule) and rule.kind == "effect")
    if measured:
        assert routes is not None
        held = routes.rules.get(rule_key(rule), RuleHeldOut())
        if held.answered == 0:
            reasons.append(f"it answered no held-out turn in the cross-fitting ({routes.measured_by})")
        elif held.exact < MIN_HELD_OUT_EXACT * held.answered:
            reasons.append(f"held out it was exact on {held.exact}/{held.answered} turns it answered "
                           f"(at least {MIN_HELD_OUT_EXACT:.0%} needed)")
    if not reasons:
        return None
    return Demotion(rule=rule.id, kind=kind, reasons=reasons, families=len(spanned),  # type: ignore[arg-type]
                    held_out_answered=held.answered if held is not None else None,
                    held_out_exact=held.exact if held is not None else None, literals=literals)


def _demoted(rule: Any, demotion: Demotion) -> Any:
    """The rule tentative, saying why; a text rule's confidence no higher than its held-out exact share (a lookup
    table right on 1% of held-out turns is not shown with the 1.00 of its own construction turns)."""
    why = "; ".join(demotion.reasons)
    update: dict[str, Any] = {"status": RuleStatus.TENTATIVE,
                              "description": f"{rule.description}; tentative: {why}".lstrip("; ")}
    if isinstance(rule, Rule) and demotion.held_out_answered:
        held_out = (demotion.held_out_exact or 0) / demotion.held_out_answered
        update["confidence"] = round(min(rule.confidence, held_out), 4)
    return rule.model_copy(update=update)


def apply_holdout(rules: Sequence[Rule], tool_rules: Sequence[ToolRule], evidence: Sequence[Evidence],
                  families: Mapping[str, str], routes: RouteTable | None
                  ) -> tuple[list[Rule], list[ToolRule], list[Demotion]]:
    """The rules and tool rules with every supported one that fails a test of the module doc made tentative, and
    the demotions (`families`: episode id -> trajectory family; `routes`: the route stage's table, None: none)."""
    observations = {item.turn_id: item.observation for item in evidence}
    demotions: list[Demotion] = []
    out_rules: list[Rule] = []
    for rule in rules:
        demotion = _judge(rule, "rule", families, observations, routes) if rule.executable else None
        out_rules.append(rule if demotion is None else _demoted(rule, demotion))
        demotions += [demotion] if demotion is not None else []
    out_tools: list[ToolRule] = []
    for tool_rule in tool_rules:
        demotion = _judge(tool_rule, "tool_rule", families, observations, routes) if tool_rule.executable else None
        out_tools.append(tool_rule if demotion is None else _demoted(tool_rule, demotion))
        demotions += [demotion] if demotion is not None else []
    return out_rules, out_tools, demotions


def as_routed(book: Worldbook) -> Worldbook:
    """The book a simulator answers with: each rule the hold-out tests alone demoted (`Worldbook.demotions`, still
    tentative) supported again, so the route table decides whether its answers are given (the module doc). A rule a
    person has since given another status keeps it. The book itself (its statuses, its report) is unchanged."""
    demoted = {demotion.rule for demotion in book.demotions}
    if not demoted:
        return book

    def restored(rule: Any) -> Any:
        if rule.id in demoted and rule.status == RuleStatus.TENTATIVE:
            return rule.model_copy(update={"status": RuleStatus.SUPPORTED})
        return rule

    return book.model_copy(update={"rules": [restored(r) for r in book.rules],
                                   "tool_rules": [restored(r) for r in book.tool_rules]})
