"""The `projection` source: a read answered with a part of the record its argument selects.

A supported projection rule (`worldbook.projections`) names the argument that selects a record, the record's
field the tool shows and how (the field, an object's values or keys, the child ids of a list field kept when
their records match filter arguments). The record, and each child a filter tests, is the `records` source's
(`sim.sources.records.RecordTracker`): the episode's newest version (write rules applied), else its initial
version in the entity store. A record is not answered from while a call of unknown effect named it since it was
shown (the tracker's `effectful` tools but the reads), a write whose rule does not execute did, or a tool the
rule found its answers go wrong after (`Projection.unsure_after`), unless it was answered with one of its
learned precondition errors (refused before any effect); a child that is not known leaves the
call to the other sources.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.lookup import at_path
from worldsmith.worldbook.lookup_rules import projection_rules
from worldsmith.worldbook.projections import FieldValues, answered_ids, learn_projections, render_projection
from worldsmith.worldbook.queries import MIN_SUPPORT, fill_slots
from worldsmith.worldbook.record_store import learn_unchanging, own_records, parse_structured, record_key
from worldsmith.worldbook.toolrules import ToolRule
from worldsmith.worldbook.writes import answer_form

__all__ = ["ProjectionSource"]


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


class ProjectionSource:
    """Answers of supported projection rules over the record tracker's records (module doc)."""

    def __init__(self, rules: Sequence[ToolRule], tracker: Any, *, gate: bool = True,
                 unchanging: set[tuple[str, str]] | None = None, values: FieldValues | None = None,
                 refusals: Sequence[ToolRule] = ()) -> None:
        """`tracker`: the `records` source's `RecordTracker` (its records, store, stale ids and write rules);
        `unchanging`: (tool, argument) pairs the evidence showed leave what they name as it was
        (`worldbook.record_store.learn_unchanging`): such an argument makes nothing unsure; `values`: the field values
        of the evidence's records, which tell a filter no unknown child can match; `refusals`: the precondition
        rules, whose errors a call answers when it was refused before any effect (it makes nothing unsure)."""
        self.rules = {r.tool: r for r in rules if r.kind == "projection" and r.executable and r.projection}
        self.tracker = tracker
        self.gate = gate
        reads = set(self.rules) | set(tracker.reads)
        # calls that may change what they name in ways no executing rule tells: a write whose rule does not
        # execute, a tool of unknown effect (the tracker's), one a rule found answers go wrong after
        self.unsure_tools = (set(tracker.writes) - set(tracker.executable)) | (set(tracker.effectful) - reads)
        for spec in (r.projection for r in self.rules.values() if r.projection is not None):
            self.unsure_tools |= set(spec.unsure_after)
        self.unchanging = unchanging if unchanging is not None else set()
        self.values = values
        self.refusals: dict[str, list[str]] = defaultdict(list)  # tool -> its learned precondition errors
        for rule in refusals:
            if rule.kind == "precondition" and rule.executable and rule.template:
                self.refusals[rule.tool].append(rule.template)
        self.reset()

    def _kept(self, step: Step, observation: str) -> set[str]:
        """The arguments of a call whose records the tracker keeps as the call left them: an executing write
        rule's selector, and the selector of each executing effect rule that acted on this answer's form (the
        tracker applies them; a call that named a record some other way may have changed it unseen)."""
        kept = set()
        write = self.tracker.writes.get(step.name) if step.name in self.tracker.executable else None
        if write is not None and write.selector is not None:
            kept.add(write.selector.argument)
        effects = self.tracker.effects.get(step.name, ())
        if effects:
            form = {"answer_form": answer_form(observation, step.arguments)}
            kept |= {rule.selector.argument for rule in effects if rule.selector is not None and form in rule.conditions}
        return kept

    def reset(self, opening: str = "") -> None:
        self.unsure: set[str] = set()  # ids such a call named since the episode last showed them

    def _refused(self, step: Step, observation: str) -> bool:
        """Whether the answer is one of the tool's learned precondition errors: checked before effects, a refused
        call changed nothing."""
        text = observation.strip()
        return any(fill_slots(template, step.arguments) == text for template in self.refusals.get(step.name, ()))

    def observe(self, step: Step, observation: str) -> None:
        if step.name in self.unsure_tools and not self._refused(step, observation):
            kept = self._kept(step, observation)
            self.unsure.update(str(v) for k, v in step.arguments.items() if _scalar(v) and k not in kept
                               and (step.name, k) not in self.unchanging)
        value = parse_structured(observation) if self.unsure else None
        if value is not None:  # a record answered again is known again: the tracker keeps the version shown
            self.unsure -= answered_ids(value)

    def record(self, key: str, ident: str) -> dict[str, Any] | None:
        """The record as the episode has it now (else the store's initial version); None when unknown, when a
        call that may have changed it (or a record nested in it) named it since it was shown, or when a record
        nested in it was shown since in another version (the copy inside is older)."""
        if ident in self.unsure:
            return None
        rkey = record_key(key, ident)
        found = self.tracker.records.get(rkey)
        found = found if found is not None else self.tracker.store.get(key, ident)
        if found is None or (self.unsure and any(str(i) in self.unsure for _, i, _ in own_records(found))):
            return None
        return None if self._outdated(rkey, found) else found

    def _outdated(self, rkey: tuple[str, str], record: dict[str, Any]) -> bool:
        """Whether a record nested in `record` was shown, after `record` was, with a field that differs."""
        records = self.tracker.records
        order = None
        for inner_key, inner, nested in own_records(record):
            newer = records.get(record_key(inner_key, inner)) if nested is not record else None
            if newer is None or newer is nested:
                continue
            if order is None:
                order = {k: i for i, k in enumerate(records)}
            if order[record_key(inner_key, inner)] > order.get(rkey, -1) and \
                    any(newer[f] != nested[f] for f in newer.keys() & nested.keys()):
                return True
        return False

    def propose(self, step: Step) -> list[CandidateAnswer]:
        rule = self.rules.get(step.name) if self.gate else None
        if rule is None or rule.projection is None:
            return []
        spec = rule.projection
        given = step.arguments.get(spec.argument)
        if not _scalar(given):
            return []
        record = self.record(spec.key, str(given))
        if record is None:
            return []
        text = render_projection(spec, record, self.record, step.arguments, self._unmatchable)
        if text is None:
            return []
        entry = {"key": f"{spec.key}={given}", "before": record, "after": record}
        return [CandidateAnswer("projection", text, outcome="success", rule=rule.id, records=[entry],
                         notes=[f"{spec.describe()} (tool rule {rule.id})"])]

    def _unmatchable(self, key: str, match: Any, given: Any) -> bool:
        """No record of kind `key` can match the filter: its field's values in the evidence are a closed set and
        neither they nor this episode's records of that kind hold `given`."""
        if self.values is None:
            return False
        held = (at_path(r, match.path) for (k, _), r in self.tracker.records.items() if k == key)
        return self.values.unmatchable(key, match, given, [v for v in held if v is not None])

    def snapshot(self) -> dict[str, Any]:
        return {"projections": sorted(self.rules), "unsure": sorted(self.unsure)[:50]}


def _rules(context: SourceContext, store: Any) -> list[ToolRule]:
    """The book's projection rules; a book built before them learns them here from its evidence."""
    rules = [r for r in context.book.tool_rules if r.kind == "projection"]
    if rules or not context.evidence or any(r.kind in ("query", "precondition") for r in context.book.tool_rules):
        return rules
    return projection_rules(learn_projections(context.evidence, store))


@answer_source("projections", snapshot_key="projections", answers=(
        Answer("projection", rank=28, trusted=True, per_action=True),), requires=("records",))
def _projections(context: SourceContext) -> AnswerSource:
    """Tool-API reads answered with a part of the selected record: a field, an object's values, filtered ids."""
    tracker = context.source("records").tracker
    rules = _rules(context, tracker.store) if context.config.knowledge else []
    unchanging = learn_unchanging(context.evidence, MIN_SUPPORT) if rules else set()
    values = FieldValues(context.evidence) if rules else None
    return ProjectionSource(rules, tracker, gate=context.tracking, unchanging=unchanging, values=values,
                            refusals=context.book.tool_rules if rules else ())
