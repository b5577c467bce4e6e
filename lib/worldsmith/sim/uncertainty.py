"""How unsure the worldbook is about one candidate action now: the signal active collection spends real steps on.

`assess(model, action)` asks the world model (a `Harness` of the book, usually) for its prediction without
committing it, and reads off what would answer: a supported rule, a tentative or conflicted one that holds here,
episode memory or another state source, nearest evidence, or nothing; how much evidence backs that answer; and
whether the action type, and the action type in this *situation*, were ever seen in the book.

The score (expected information for the book, in [0, 1]; 1: nothing answers and the action was never seen):

    score = 0.5 * answer + 0.2 * 1 / (1 + evidence) + 0.3 * (1 / (1 + action_seen) + 1 / (1 + feature_seen)) / 2

- `answer`: the expected error of the answer that would be given. Its prior is the level of its source
  (`SOURCE_LEVELS`): nothing 1.0 > nearest evidence 0.8 > episode memory, entity records and other state sources
  0.6 > a conflicted rule that holds here 0.45 > a tentative one 0.35 > a supported rule (or a tool rule's executable
  answer) 0.1. A non-executable rule that holds here lowers the level of a weaker answer to its own (the book has a
  hypothesis; a real step tests it rather than discovers), as a prior only. The book's route table
  (`Worldbook.routes`) measured, by cross-fitting on held-out trajectory families, how often each source was exact
  for each action; with `proposed` held-out turns of which `exact` were exact the term is the posterior mean of a
  Beta prior of strength `PRIOR_TURNS` centred on the level:

      answer = 1 - (exact + PRIOR_TURNS * (1 - level)) / (proposed + PRIOR_TURNS)

  (a rule: its form's row, else the action's rules; a source judged per action only: the action's row; others: else
  the source's pooled row; nearest evidence: its exact turns beside the action's most measured source; nothing
  answering: 1.0). Unmeasured, it is the level; measured often, it follows the data: a supported rule that was
  mostly wrong held out stays worth a real step.
- `evidence`: the trace turns backing the answer: a rule's supporting turns (`RuleProvenance`), else the book's
  evidence turns of the same action line. More evidence, less to learn: a 1/(1+n) decay.
- novelty: `action_seen` counts the book's evidence turns of the action type (its canonical name);
  `feature_seen` those of the action type in the same situation signature (below). Each decays as 1/(1+n).

The book keeps no state at its evidence turns, so the situation signature is derived cheaply from what both the
live episode and the book's evidence have, the observation before the action and the episode so far:
`name | for each scalar argument (sorted by name): whether its value is shown in the preceding observation |
whether the same action line was already taken in this episode`. "take the key" with the key in sight, a
`get_order(order_id=...)` with an id the last answer listed, a revisit: each a different situation from its
counterpart. For an episode's first evidence turn the preceding observation (the opening) is not in the book,
so every argument counts as not shown there.

Nothing is committed: the model's history, state and pending prediction are as they were before `assess`.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.envs.base import InvalidActionError, as_action
from worldsmith.sim.base import Prediction, WorldModel, action_line
from worldsmith.sim.retrieval import action_arguments
from worldsmith.sim.sources.base import CandidateAnswer, line_key
from worldsmith.sim.sources.registry import routing_order
from worldsmith.traces.model import Action
from worldsmith.worldbook.model import Rule, RuleStatus, Worldbook
from worldsmith.worldbook.route_table import RouteStats, RouteTable
from worldsmith.worldbook.rule_replay import select_rule

__all__ = [
    "SOURCE_LEVELS",
    "PRIOR_TURNS",
    "BookCounts",
    "Uncertainty",
    "assess",
    "book_counts",
    "expected_error",
    "information",
    "rank_actions",
    "situation",
]

RuleLevel = Literal["supported", "tentative", "conflicted"]

# The information an answer of each kind leaves to gain (the `answer` term of the score).
NOTHING, NEAREST, STATE, CONFLICTED, TENTATIVE, SUPPORTED = 1.0, 0.8, 0.6, 0.45, 0.35, 0.1
SOURCE_LEVELS: dict[str | None, float] = {
    None: NOTHING, "nearest_evidence": NEAREST, "model": NEAREST,
    "rule": SUPPORTED, "record_write": SUPPORTED, "projection": SUPPORTED, "precondition": SUPPORTED,
    "precondition_enum": SUPPORTED, "query": SUPPORTED, "query_empty": SUPPORTED,
}  # any other answer name (memory, entity, place, fields, scope, shell, ...): STATE
_TOOL_RULE_SOURCES = frozenset(name for name, level in SOURCE_LEVELS.items() if level == SUPPORTED and name != "rule")
_STATUS_LEVEL = {"supported": SUPPORTED, "tentative": TENTATIVE, "conflicted": CONFLICTED}
W_ANSWER, W_EVIDENCE, W_NOVELTY = 0.5, 0.2, 0.3
PRIOR_TURNS = 4.0  # held-out turns the source level counts as (the Beta prior's strength)


class Uncertainty(BaseModel):
    """How unsure the book is about one candidate action in the current state (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    action: str = Field(description="The action line (`sim.base.action_line`).")
    source: str | None = Field(description="The answer source that would answer (`Audit.source`); None: nothing.")
    route: str = Field(description="`Audit.route` of the prediction.")
    rules: list[str] = Field(default_factory=list, description="Ids of the rules that fired (or hold here).")
    rule_status: RuleLevel | None = Field(default=None, description="The weakest status among those rules.")
    evidence: int = Field(ge=0, description="Trace turns backing the answer (rule provenance / evidence count).")
    action_seen: int = Field(ge=0, description="Book turns of this action type (name).")
    feature_seen: int = Field(ge=0, description="Book turns of this action type x situation signature.")
    score: float = Field(ge=0.0, le=1.0, description="Expected information: 1 = nothing answers / never seen.")
    reason: str = Field(description="One short human sentence.")
    name: str = Field(default="", description="The action's canonical name (its type).")
    signature: str = Field(default="", description="The situation signature `feature_seen` counts.")
    outcome: str = Field(default="unknown", description="The predicted outcome.")
    done: bool = Field(default=False, description="The model predicts the episode ends with this action.")
    level: float = Field(default=NOTHING, ge=0.0, le=1.0, description="The answer's source level (the prior).")
    measured: int = Field(default=0, ge=0, description="Held-out turns the route table measured the answer on.")
    measured_exact: int = Field(default=0, ge=0, description="Of those, exact.")
    expected_error: float = Field(default=NOTHING, ge=0.0, le=1.0,
                                  description="The `answer` term: the level moved toward the measured error rate.")


# ------------------------------------------------------------------------------------------ situations


def _scalar_values(arguments: Any) -> list[tuple[str, str]]:
    if not isinstance(arguments, Mapping):
        return []
    return [(str(key), str(value).strip().lower()) for key, value in sorted(arguments.items(), key=lambda kv: str(kv[0]))
            if isinstance(value, str | int | float) and not isinstance(value, bool) and str(value).strip()]


def situation(name: str, arguments: Any, before: str, repeated: bool) -> str:
    """The situation signature of an action (see the module doc): its name, which argument values the observation
    `before` it shows, and whether it repeats an action line of the episode."""
    shown = before.lower()
    flags = ",".join(f"{key}={'shown' if value in shown else 'new'}" for key, value in _scalar_values(arguments))
    return f"{name}|{flags}|{'repeat' if repeated else 'first'}"


@dataclass(frozen=True)
class BookCounts:
    """What `assess` counts in a book, once per book: evidence turns by action name, by action line and by
    situation signature."""

    by_name: Counter[str]
    by_line: Counter[str]
    by_situation: Counter[str]

    @classmethod
    def of(cls, book: Worldbook) -> BookCounts:
        by_name: Counter[str] = Counter()
        by_line: Counter[str] = Counter()
        by_situation: Counter[str] = Counter()
        episodes: dict[str, list[tuple[int, Any]]] = {}
        for item in book.evidence:
            episode, _, number = item.turn_id.rpartition("#")
            episodes.setdefault(episode, []).append((int(number), item))
        for turns in episodes.values():
            turns.sort(key=lambda pair: pair[0])
            observed: dict[int, str] = {index: item.observation for index, item in turns}
            lines: set[str] = set()
            for index, item in turns:
                line = line_key(item.action_text)
                by_name[item.action] += 1
                by_line[line] += 1
                by_situation[situation(item.action, item.arguments, observed.get(index - 1, ""), line in lines)] += 1
                lines.add(line)
        return cls(by_name, by_line, by_situation)


_COUNTS: OrderedDict[int, tuple[Worldbook, int, BookCounts]] = OrderedDict()
_COUNTS_KEPT = 8


def book_counts(book: Worldbook) -> BookCounts:
    """`BookCounts.of(book)`, kept for the last few books (a policy assesses dozens of actions a step); counted
    again when the book's evidence list changed length (a book grown in place)."""
    key = id(book)
    kept = _COUNTS.get(key)
    if kept is not None and kept[0] is book and kept[1] == len(book.evidence):
        _COUNTS.move_to_end(key)
        return kept[2]
    counts = BookCounts.of(book)
    _COUNTS[key] = (book, len(book.evidence), counts)
    while len(_COUNTS) > _COUNTS_KEPT:
        _COUNTS.popitem(last=False)
    return counts


# ------------------------------------------------------------------------------------------ assess


def _predict_aside(model: WorldModel, action: Action | str | dict[str, Any]) -> Prediction:
    """The model's prediction, its pending one kept (`WorldModelBase.predict_aside`); `predict` never changes
    history or state (the `WorldModel` protocol)."""
    aside = getattr(model, "predict_aside", None)
    return aside(action) if callable(aside) else model.predict(action)


def _canonical(model: WorldModel, action: Action) -> tuple[str, dict[str, Any]]:
    canonical = getattr(model, "canonical", None)
    if callable(canonical):
        name, arguments, _ = canonical(action)
        return name, arguments
    return action.name, action_arguments(action)


def _weakest(statuses: Sequence[str]) -> RuleLevel | None:
    levels: tuple[RuleLevel, ...] = ("conflicted", "tentative", "supported")  # weakest first
    return next((level for level in levels if level in statuses), None)


def _support(rule: Any) -> int:
    return max(int(rule.support), rule.provenance.count("supporting"))


def _held_rules(model: WorldModel, name: str, arguments: dict[str, Any]) -> list[Rule]:
    """The tentative or conflicted rule of the action that holds in the model's state (the book's hypothesis)."""
    rules: Mapping[str, Sequence[Rule]] = getattr(model, "rules", None) or {}
    candidates = [rule for rule in rules.get(name, []) if rule.status in (RuleStatus.TENTATIVE, RuleStatus.CONFLICTED)]
    if not candidates:
        return []
    selection = select_rule(candidates, arguments, getattr(model, "state", None) or {})
    return [selection.rule] if selection.rule is not None else []


def assess(model: WorldModel, action: Action | str | dict[str, Any]) -> Uncertainty:
    """How unsure `model`'s book is about `action` now (see the module doc); never commits."""
    prediction = _predict_aside(model, action)
    try:
        parsed = as_action(action)
    except InvalidActionError:
        parsed = Action(name="", arguments={}, raw=str(action)[:500])
    line = action_line(parsed)
    book: Worldbook | None = getattr(model, "book", None)
    name, arguments = _canonical(model, parsed) if parsed.name else ("", {})
    audit = prediction.audit
    source = audit.source
    level = SOURCE_LEVELS.get(source, STATE) if audit.route != "fallback:none" else NOTHING
    rule_ids: list[str] = list(audit.rules)
    statuses: list[str] = []
    evidence = 0
    if book is not None and rule_ids:
        fired = [rule for rule in book.rules if rule.id in set(rule_ids)]
        statuses = [rule.status.value for rule in fired]
        if audit.conflicts:
            statuses.append("conflicted")
        evidence = max((_support(rule) for rule in fired), default=0)
    elif book is not None and source in _TOOL_RULE_SOURCES:
        tool_rules = [rule for rule in book.tool_rules if rule.tool == name and rule.executable]
        rule_ids = [rule.id for rule in tool_rules]
        statuses = ["supported"] if tool_rules else []
        evidence = max((_support(rule) for rule in tool_rules), default=0)
    elif book is not None and name:
        held = _held_rules(model, name, arguments)
        if held:
            rule_ids = [rule.id for rule in held]
            statuses = [rule.status.value for rule in held]
            level = min(level, _STATUS_LEVEL[statuses[0]])
    rule_status = _weakest(statuses)
    if rule_status is not None and rule_ids and source in ("rule", *_TOOL_RULE_SOURCES):
        level = _STATUS_LEVEL[rule_status] if rule_status != "supported" else SUPPORTED
    answered = source if audit.route != "fallback:none" else None
    forms = [rule.template for rule in (book.rules if book is not None else []) if rule.id in set(audit.rules)]
    stats = _measured(book.routes if book is not None else None, name, answered, forms[0] if forms else None)
    error = expected_error(level, stats)
    counts = book_counts(book) if book is not None else None
    if counts is not None and evidence == 0:
        evidence = counts.by_line.get(line_key(line), 0)
    history = getattr(model, "history", None) or []
    last = getattr(model, "last_observation", None)
    before = last() if callable(last) else ""
    repeated = any(line_key(action_line(item.action)) == line_key(line) for item in history)
    signature = situation(name, arguments, before, repeated)
    action_seen = counts.by_name.get(name, 0) if counts is not None else 0
    feature_seen = counts.by_situation.get(signature, 0) if counts is not None else 0
    score = information(error, evidence, action_seen, feature_seen)
    return Uncertainty(action=line, source=answered, route=audit.route,
                       rules=rule_ids, rule_status=rule_status, evidence=evidence, action_seen=action_seen,
                       feature_seen=feature_seen, score=score,
                       reason=_reason(answered, rule_status, evidence, action_seen, feature_seen, stats),
                       name=name, signature=signature, outcome=prediction.outcome,
                       done=prediction.done, level=level, measured=stats.proposed if stats is not None else 0,
                       measured_exact=stats.exact if stats is not None else 0, expected_error=round(error, 6))


def _measured(table: RouteTable | None, name: str, source: str | None, form: str | None) -> RouteStats | None:
    """The route table's held-out record of the answer `source` would give for action `name` (None: unmeasured).

    A rule: its form's row, else the action's rules' row, else the pooled rules' row. A source judged per action
    only: the action's own row. Nearest evidence is the baseline every row was measured beside, so its exact turns
    are read off the action's most measured row (exact, less wins, plus losses). Nothing answering: None."""
    if table is None or source is None or not name:
        return None
    if source == "nearest_evidence":
        rows = [stats for key, stats in table.actions.get(name, {}).items() if key != "suffix"]
        if not rows:
            return None
        row = max(rows, key=lambda stats: stats.proposed)
        if row.proposed < table.min_turns:
            return None
        return RouteStats(proposed=row.proposed, exact=min(row.proposed, max(0, row.exact - row.wins + row.losses)))
    known = routing_order().get(source)
    per_action = known is not None and known.per_action
    key = CandidateAnswer(source, "", form=form).key if form else source
    return table.stats(name, key, fallback=source, pooled=not per_action)


def expected_error(level: float, stats: RouteStats | None, prior_turns: float = PRIOR_TURNS) -> float:
    """The posterior mean error rate of an answer: a Beta prior of `prior_turns` turns centred on `level` (the
    source level), updated by the route table's held-out turns `stats`; `level` itself when unmeasured."""
    if stats is None or stats.proposed == 0:
        return level
    return 1.0 - (stats.exact + prior_turns * (1.0 - level)) / (stats.proposed + prior_turns)


def information(answer: float, evidence: int, action_seen: int, feature_seen: int) -> float:
    """The score of the module doc: `answer` the expected error of what would answer (`expected_error`, 0..1), then the
    counts; in [0, 1], 1 for nothing answering an action never seen, lower with every count."""
    if not 0.0 <= answer <= 1.0 or min(evidence, action_seen, feature_seen) < 0:
        raise ValueError(f"information() needs an answer level in [0, 1] and counts >= 0, not "
                         f"{answer}, {evidence}, {action_seen}, {feature_seen}")
    novelty = (1 / (1 + action_seen) + 1 / (1 + feature_seen)) / 2
    return round(W_ANSWER * answer + W_EVIDENCE / (1 + evidence) + W_NOVELTY * novelty, 6)


def _turns(count: int, what: str = "turn") -> str:
    return f"{count} {what}" + ("" if count == 1 else "s")


def _reason(source: str | None, status: str | None, evidence: int, action_seen: int, feature_seen: int,
            stats: RouteStats | None = None) -> str:
    if source is None:
        answer = "nothing in the book answers it"
    elif source == "rule" or source in _TOOL_RULE_SOURCES:
        answer = f"a {status or 'supported'} rule answers it ({_turns(evidence, 'supporting turn')})"
    else:
        held = f", a {status} rule holds here" if status is not None else ""
        answer = f"{source.replace('_', ' ')} answers it ({_turns(evidence)} of this line{held})"
    if source is not None and stats is not None and stats.proposed:
        answer += f", exact on {stats.exact} of {_turns(stats.proposed, 'held-out turn')}"
    if action_seen == 0:
        seen = "the action type was never seen"
    elif feature_seen == 0:
        seen = f"the action type was seen in {_turns(action_seen)}, never in this situation"
    else:
        seen = f"seen in {_turns(action_seen)}, {feature_seen} in this situation"
    return f"{answer}; {seen}."


def rank_actions(model: WorldModel, actions: Sequence[Action | str | dict[str, Any]]) -> list[Uncertainty]:
    """Every action assessed, the highest score first (ties keep the given order)."""
    assessed = [assess(model, action) for action in actions]
    return sorted(assessed, key=lambda item: -item.score)
