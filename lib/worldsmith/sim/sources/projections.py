"""The `projection` source: a read answered with a part of the record its argument selects.

A supported projection rule (`worldbook.projections`) names the argument that selects a record, the record's
field the tool shows and how (the field, an object's values or keys, the child ids of a list field kept when
their records match filter arguments). The record, and each child a filter tests, is the `records` source's
(`sim.sources.records.RecordTracker`): the episode's newest version (write rules applied), else its initial
version in the entity store. A record is not answered from while a call of unknown effect named it since it was
shown (the tracker's `effectful` tools but the reads), a write whose rule does not execute did, or a tool the
rule found its answers go wrong after (`Projection.unsure_after`); a child that is not known leaves the
call to the other sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, Proposal, SourceContext, Step
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.lookup_rules import projection_rules
from worldsmith.worldbook.projections import answered_ids, learn_projections, render_projection
from worldsmith.worldbook.records import own_records, parse_json, record_key
from worldsmith.worldbook.toolrules import ToolRule

__all__ = ["ProjectionSource"]


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


class ProjectionSource:
    """Answers of supported projection rules over the record tracker's records (module doc)."""

    def __init__(self, rules: Sequence[ToolRule], tracker: Any, *, gate: bool = True) -> None:
        """`tracker`: the `records` source's `RecordTracker` (its records, store, stale ids and write rules)."""
        self.rules = {r.tool: r for r in rules if r.kind == "projection" and r.executable and r.projection}
        self.tracker = tracker
        self.gate = gate
        reads = set(self.rules) | set(tracker.reads)
        # calls that may change what they name in ways no executing rule tells: a write whose rule does not
        # execute, a tool of unknown effect (the tracker's), one a rule found answers go wrong after
        self.unsure_tools = (set(tracker.writes) - set(tracker.executable)) | (set(tracker.effectful) - reads)
        for spec in (r.projection for r in self.rules.values() if r.projection is not None):
            # a write whose rule executes on this kind of record keeps it known (the tracker applies it)
            self.unsure_tools |= {tool for tool in spec.unsure_after if not (
                tool in tracker.executable and tracker.writes[tool].selector.key == spec.key)}
        self.reset()

    def reset(self, opening: str = "") -> None:
        self.unsure: set[str] = set()  # ids such a call named since the episode last showed them

    def observe(self, step: Step, observation: str) -> None:
        if step.name in self.unsure_tools:
            self.unsure.update(str(v) for v in step.arguments.values() if _scalar(v))
            return
        value = parse_json(observation) if self.unsure else None
        if value is not None:  # a record answered again is known again: the tracker keeps the version shown
            self.unsure -= answered_ids(value)

    def record(self, key: str, ident: str) -> dict[str, Any] | None:
        """The record as the episode has it now (else the store's initial version); None when unknown, or when a
        call that may have changed it (or a record nested in it) named it since it was shown."""
        if ident in self.unsure:
            return None
        found = self.tracker.records.get(record_key(key, ident))
        found = found if found is not None else self.tracker.store.get(key, ident)
        if found is None or (self.unsure and any(str(i) in self.unsure for _, i, _ in own_records(found))):
            return None
        return found

    def propose(self, step: Step) -> list[Proposal]:
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
        text = render_projection(spec, record, self.record, step.arguments)
        if text is None:
            return []
        entry = {"key": f"{spec.key}={given}", "before": record, "after": record}
        return [Proposal("projection", text, outcome="success", rule=rule.id, records=[entry],
                         notes=[f"{spec.describe()} (tool rule {rule.id})"])]

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
    return ProjectionSource(rules, tracker, gate=context.tracking)
