"""Query, empty-result and precondition rules as `ToolRule`s: what the build's `tools` stage adds to the writes.

    rules = learn_lookup_rules(evidence, readers=readers)   # kinds query, empty, precondition, projection

One learn function per family over one record store (`worldbook.record_store.RecordStore`, its entity reading),
each linear in the evidence: `query_rules` (an id or list found by matching arguments against record attributes,
`worldbook.queries`), `empty_rules` (the answer when nothing matches, from the same replay) and
`precondition_rules` (learned error templates, `worldbook.preconditions`) and `projection_rules` (a part of the
record an argument selects: a field, an object's values or keys, a filtered list of child ids,
`worldbook.projections`). Status, support and provenance are
the learners'; a person curates them like any rule (`worldsmith book tools BOOK --kind query`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from worldsmith.worldbook.lookup_specs import Precondition, Projection, QueryRule
from worldsmith.worldbook.model import Evidence, RuleProvenance, RuleStatus
from worldsmith.worldbook.preconditions import COMPLETE, learn_preconditions
from worldsmith.worldbook.projections import learn_projections
from worldsmith.worldbook.queries import MAX_CONTRADICTION, MIN_SUPPORT, learn_queries
from worldsmith.worldbook.record_store import RecordStore, learn_readers
from worldsmith.worldbook.toolrules import ToolRule

__all__ = ["empty_rules", "learn_lookup_rules", "precondition_rules", "projection_rules", "query_rules", "rule_id"]


def rule_id(*parts: str) -> str:
    """A tool rule's id from its kind and tool (and a number): ":"-joined, other characters made "_"."""
    return ":".join(re.sub(r"[^A-Za-z0-9_.\-]", "_", part) for part in parts)


def _provenance(supporting: Sequence[str], contradicting: Sequence[str], support: int, against: int) -> RuleProvenance:
    return RuleProvenance(supporting=list(supporting), contradicting=list(contradicting),
                          supporting_total=support if support > len(supporting) else None,
                          contradicting_total=against if against > len(contradicting) else None)


def _compared(rule: QueryRule) -> str:
    return ", ".join(f"{m.argument} ~ {'.'.join(m.path)} ({m.mode})" for m in rule.matches)


def query_rules(queries: Sequence[QueryRule]) -> list[ToolRule]:
    """Kind `query`: the records of `query.kind` whose attributes match the arguments, answered in the tool's form."""
    return [ToolRule(id=rule_id("query", q.action), tool=q.action, kind="query", query=q, status=q.status,
                     support=q.support, counterexamples=list(q.contradicting_turns),
                     provenance=_provenance(q.supporting_turns, q.contradicting_turns, q.support, q.contradicting),
                     description=f"{q.kind} records whose {_compared(q)}, answered as {q.form}")
            for q in queries]


def empty_rules(queries: Sequence[QueryRule], store: RecordStore) -> list[ToolRule]:
    """Kind `empty`: a query's answer when no record matches (`template`, arguments slotted); supported when the
    query is, at least `MIN_SUPPORT` calls that matched nothing were answered so, and the store is complete for
    the kind (most of its records were met by more than one task, `preconditions.COMPLETE`): where each task has
    its own records, "none matches" is what an unseen task's real entity looks like too."""
    out = []
    for q in queries:
        if q.empty is None:
            continue
        coverage = store.coverage(q.kind, list(store.of_kind(q.kind)))
        ok = q.status == RuleStatus.SUPPORTED and q.empty_support >= MIN_SUPPORT \
            and q.empty_contradicting <= MAX_CONTRADICTION * q.empty_support and coverage >= COMPLETE
        out.append(ToolRule(id=rule_id("empty", q.action), tool=q.action, kind="empty", query=q, template=q.empty,
                            status=RuleStatus.SUPPORTED if ok else RuleStatus.TENTATIVE, support=q.empty_support,
                            description=f"no {q.kind} record whose {_compared(q)}: {q.empty_contradicting} such "
                                        f"calls were answered otherwise; {coverage:.0%} of the {q.kind} records "
                                        "were met by more than one task"))
    return out


def precondition_rules(preconditions: Sequence[Precondition]) -> list[ToolRule]:
    """Kind `precondition`: the error `template` when the test holds, checked in the listed order per tool."""
    out = []
    counts: dict[str, int] = {}
    for p in preconditions:
        counts[p.action] = counts.get(p.action, 0) + 1
        out.append(ToolRule(id=rule_id("precondition", p.action, str(counts[p.action])), tool=p.action,
                            kind="precondition", precondition=p, template=p.template, status=p.status,
                            support=p.support, counterexamples=list(p.contradicting_turns),
                            provenance=_provenance(p.supporting_turns, p.contradicting_turns, p.support,
                                                   p.contradicting),
                            description=p.describe()))
    return out


def projection_rules(projections: Sequence[Projection]) -> list[ToolRule]:
    """Kind `projection`: the part of the record the selecting argument names, in the tool's layout."""
    return [ToolRule(id=rule_id("projection", p.action), tool=p.action, kind="projection", projection=p,
                     status=p.status, support=p.support, counterexamples=list(p.contradicting_turns),
                     provenance=_provenance(p.supporting_turns, p.contradicting_turns, p.support, p.contradicting),
                     description=p.describe())
            for p in projections]


def learn_lookup_rules(evidence: Sequence[Evidence], *, readers: set[str] | None = None,
                       families: Mapping[str, str] | None = None, store: RecordStore | None = None) -> list[ToolRule]:
    """Every query, empty, precondition and projection rule of the evidence (`readers`: the tools whose answers are
    record versions, as the write learner found them, learned here when not given; `families`: episode id -> trajectory
    family, so "the store is complete for a kind" means other tasks met the same records, not another recording
    of the same task)."""
    readers = learn_readers(evidence) if readers is None else readers
    store = store if store is not None else RecordStore.from_evidence(evidence, readers, families)
    queries = learn_queries(evidence, store)
    return query_rules(queries) + empty_rules(queries, store) + \
        precondition_rules(learn_preconditions(evidence, store)) + \
        projection_rules(learn_projections(evidence, store, readers))
