"""The world-model harness (Trace2Env online): state, rules first, a model only where rules end.

One `predict`:

1. canonicalize the action through the action schema (aliases, text commands split into named
   arguments) and type-check it (required arguments present);
2. check *every* executable rule of the action against the session state (no retrieval limit can
   hide one); equal-rank rules that both hold with different templates are a recorded conflict;
3. **fast path**: the chosen rule renders the observation from arguments and state;
   **agent route** otherwise, when a model is attached: a brief and a bounded tool loop
   (`sim.agent`), ending in a submitted transition;
   **no model**: the observation this same action got earlier in the episode (episode memory), else
   the closest evidence for the action adapted to the current arguments, marked as a fallback;
4. the proposed effects are validated on a copy of the state against the state schema and the
   trust policy (`rules_only`: only a supporting rule's effects; `schema_checked`: schema-valid
   effects are accepted and flagged); rejected effects leave the state unchanged, recorded;
5. the state after the turn is read back from the answered observation (what it shows, the fitting
   rule's effects), so what was said and what is remembered never disagree.

State from an observed prefix is rebuilt the same way before the first prediction, and an observed
output is never overridden by a rule.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from worldsmith.envs.base import as_action
from worldsmith.llm.base import LLM
from worldsmith.sim.base import Audit, HistoryItem, Prediction, WorldModelBase, action_line
from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.fields import FieldTracker
from worldsmith.sim.inventory import InventoryTracker
from worldsmith.sim.retrieval import action_arguments
from worldsmith.sim.routing import ROUTE_NAMES, choose_route
from worldsmith.sim.scope import ScopeTracker
from worldsmith.sim.shell_state import ShellTracker
from worldsmith.sim.sources import tool_sources
from worldsmith.sim.sources.records import RecordTracker
from worldsmith.sim.suffixes import SuffixConditions
from worldsmith.sim.trackers import AlignedEvidence, EntityTracker, PlaceTracker, Proposal, TurnCounter
from worldsmith.sim.views import ViewEdits
from worldsmith.traces.model import Action
from worldsmith.worldbook.engine import EffectError, apply_effects, match_template, render, resolve_path
from worldsmith.worldbook.model import Effect, Evidence, Rule, Worldbook, join_path
from worldsmith.worldbook.replay import list_formats, observe_turn, select_rule
from worldsmith.worldbook.termination import predicts_done

__all__ = ["Harness", "HarnessConfig", "schema_problems"]


@dataclass(frozen=True)
class HarnessConfig:
    trust_policy: Literal["rules_only", "schema_checked"] = "rules_only"
    knowledge: bool = True  # False: the schema only (no rules, notes or evidence); state tracking stays on
    use_memory: bool = True  # answer a repeated action from episode memory when no rule renders it
    persistent_state: bool = True  # False (an ablation): every prediction starts from an empty state
    fallback: bool = True  # False (an ablation): no memory or nearest-evidence answer when rules and model fail
    strict_schema: bool = False  # True: an action missing a required argument is refused (failure:invalid_arguments);
    # False: a learned schema can be incomplete, so the problem is noted in the audit and the action still answered
    max_tool_steps: int = 6  # the agent route's tool calls before a forced submission; 0: single-shot submit
    brief_chars: int = 6000
    max_tokens: int = 256


_ANY_KEY = "\x00"  # `{key}` in a schema path: any one segment
_VIEWS = frozenset({"place_memory", "map", "place_view", "memory"})  # sources that may answer with a place's view


def _schema_segments(book: Worldbook) -> list[list[str]]:
    """Each state-schema path as segments (bracketed keys un-escaped), `{key}` as a wildcard segment."""
    out = []
    for path in book.state_schema.paths:
        segments = resolve_path(path.path.replace("{key}", _ANY_KEY), {})
        if segments is not None:
            out.append(segments)
    return out


def _fits(segments: Sequence[str], pattern: Sequence[str]) -> bool:
    return len(segments) == len(pattern) and all(p in (_ANY_KEY, s) for s, p in zip(segments, pattern, strict=True))


def schema_problems(book: Worldbook, effects: Sequence[Effect], arguments: Mapping[str, Any]) -> list[str]:
    """Why these effects do not fit the state schema (empty when they do, or the schema is empty)."""
    if not book.state_schema.paths:
        return []
    patterns = _schema_segments(book)
    problems = []
    for effect in effects:
        segments = resolve_path(effect.path, arguments)
        if segments is None:
            problems.append(f"{effect.path}: names an argument the action does not have")
            continue
        if not any(_fits(segments, pattern) for pattern in patterns):
            problems.append(f"{effect.path}: no state path of the schema matches {join_path(segments)!r}")
    return problems


class Harness(WorldModelBase):
    """Rules over tracked state; a model (optional) for what the rules do not cover."""

    name = "harness"

    def __init__(self, book: Worldbook, *, llm: LLM | None = None, config: HarnessConfig = HarnessConfig()) -> None:
        super().__init__()
        self.book = book
        self.llm = llm
        self.config = config
        self.formats = list_formats(book)
        self.rules: dict[str, list[Rule]] = {}
        self.all_rules: dict[str, list[Rule]] = {}  # every form, whatever its status: what re-rendering reads
        if config.knowledge:
            for rule in book.rules:
                self.rules.setdefault(rule.action, []).append(rule)
            for rule in sorted(book.rules, key=lambda r: (not r.executable, -r.support, r.id)):
                self.all_rules.setdefault(rule.action, []).append(rule)
        self.nearest = NearestEvidence(book, same_shape_first=True) if config.knowledge and book.evidence else None
        self.memory: dict[str, str] = {}  # action line -> the last observation it got in this episode
        evidence = book.evidence if config.knowledge else []
        self.places = PlaceTracker(evidence)
        self.entities = EntityTracker(evidence)
        self.record_source = RecordTracker(evidence, book.tool_rules if config.knowledge else ())
        self.fields = FieldTracker(evidence)
        self.aligned = AlignedEvidence(evidence)
        self.shell = ShellTracker(evidence)
        self.inventory = InventoryTracker(evidence, place_of=self.places.place_of)
        self.view_edits = ViewEdits(evidence, view_of=self.places.view_of, carriers=self.inventory.carriers,
                                    joins_front=next(iter(self.inventory.front.values()), None))
        self.scope = ScopeTracker(evidence, place_of=self.places.place_of, carriers=self.inventory.carriers)
        self.counter = TurnCounter(evidence)
        self.suffixes = SuffixConditions(evidence)
        self.queries, self.preconditions = tool_sources(book if config.knowledge else None)
        self.routes = book.routes if config.knowledge else None
        if not config.knowledge:
            self.name = "harness-no-book"  # the registered name (sim.factory)

    # ------------------------------------------------------------------ state
    def canonical(self, action: Action) -> tuple[str, dict[str, Any], list[str]]:
        """(canonical name, named arguments, problems) through the action schema."""
        spec = self.book.action_schema.get(action.name)
        name = spec.name if spec is not None else action.name
        arguments = action_arguments(action)
        problems: list[str] = []
        if spec is None:
            if self.book.action_schema.actions:
                problems.append(f"unknown action {action.name!r}")
            return name, arguments, problems
        if spec.pattern and action.raw and set(arguments) <= {"text"}:
            match = re.match(spec.pattern, action.raw)
            if match:
                arguments = {k: v for k, v in match.groupdict().items() if v is not None}
        for argument in spec.arguments:
            if argument.required and argument.name not in arguments:
                problems.append(f"{name}: missing required argument {argument.name!r}")
        return name, arguments, problems

    def _evidence(self, name: str, arguments: dict[str, Any], action: Action, observation: str) -> Evidence:
        return Evidence(turn_id="live#0", action=name, arguments=arguments, action_text=action_line(action),
                        observation=observation)

    def _after(self, name: str, arguments: dict[str, Any], action: Action, observation: str,
               state: Mapping[str, Any]) -> tuple[dict[str, Any], Rule | None]:
        """The state once `observation` answered `action` (what it shows, the fitting rule's effects)."""
        return observe_turn(self.rules.get(name, []), self._evidence(name, arguments, action, observation), state,
                            self.formats)

    def _on_start(self) -> None:
        """Rebuild state, episode memory and the trackers by reading the observed prefix."""
        self.memory = {}
        self.places.reset(self.initial_observation)
        self.entities.reset()
        self.record_source.reset(self.initial_observation)
        self.fields.reset()
        self.aligned.reset()
        self.shell.reset(self.initial_observation)
        self.scope.reset(self.initial_observation)
        self.inventory.reset(self.initial_observation)
        self.view_edits.reset(self.initial_observation)
        self.suffixes.reset()
        self.queries.reset(self.initial_observation)
        self.preconditions.reset(self.initial_observation)
        for item in self.history:
            self._observe_item(item.action, item.observation)

    def _observe_item(self, action: Action, observation: str) -> None:
        name, arguments, _ = self.canonical(action)
        self.state, _ = self._after(name, arguments, action, observation, self.state)
        self._remember(action, name, arguments, observation)

    def _remember(self, action: Action, name: str, arguments: dict[str, Any], observation: str) -> None:
        line = action_line(action)
        self.memory[line] = observation
        self.places.observe(name, line, observation)
        self.entities.observe(name, arguments, observation)
        self.record_source.observe(name, arguments, observation)
        self.fields.observe(name, arguments, observation)
        self.aligned.observe(line, observation)
        self.shell.observe(line, observation)
        self.scope.observe(name, arguments, observation)
        self.inventory.observe(name, arguments, observation)
        self.view_edits.observe(name, arguments, observation)
        self.suffixes.observe(line, observation)
        self.queries.observe(name, arguments, observation)
        self.preconditions.observe(name, arguments, observation)

    def observe(self, action: Action | str | dict[str, Any], observation: str) -> None:
        """Teacher forcing: take a real (action, observation) into history, state and memory without predicting."""
        parsed = as_action(action)
        self._observe_item(parsed, observation)
        self.history.append(HistoryItem(action=parsed, observation=observation))
        self._pending = None

    def _on_commit(self, action: Action, prediction: Prediction) -> None:
        name, arguments, _ = self.canonical(action)
        self._remember(action, name, arguments, prediction.observation)

    def tracked(self) -> dict[str, Any]:
        """What the trackers believe now (place, map, entity records): for the audit and for people."""
        return {"places": self.places.snapshot(), "entities": self.entities.snapshot(),
                "records": self.record_source.snapshot(),
                "fields": self.fields.snapshot(), "shell": self.shell.snapshot(),
                "scope": self.scope.snapshot(), "carried": self.inventory.snapshot(),
                "trailing lines": self.suffixes.snapshot(), "queries": self.queries.snapshot(),
                "preconditions": self.preconditions.snapshot()}

    # ------------------------------------------------------------------ predict
    def proposals(self, action: Action, name: str, arguments: dict[str, Any]) -> tuple[list[Proposal], list[str]]:
        """Every source's answer for this action now, in priority order, and notes on sources that gave none."""
        notes: list[str] = []
        out: list[Proposal] = []
        line = action_line(action)
        candidates = [rule for rule in self.rules.get(name, []) if rule.executable]
        selection = select_rule(candidates, arguments, self.state)
        rule = selection.rule
        if rule is not None:
            observation = render(rule.template, arguments, self.state, self.formats)
            if observation is not None:
                proposal = Proposal("rule", observation, outcome=rule.outcome, rule=rule.id, effects=list(rule.effects),
                                    form=rule.template, conflicts=list(selection.conflicts))
                if selection.route == "assumed":
                    proposal.notes.append("conditions of a more specific rule are unknown here: assumed")
                out.append(proposal)
            else:
                notes.append(f"rule {rule.id} applies but its template needs state not known yet")
        if self.config.use_memory and self.config.knowledge:
            out += self.preconditions.propose(name, arguments, line)
            out += self.queries.propose(name, arguments, line)
            out += self.entities.propose(name, arguments)
            out += self.record_source.propose(name, arguments, line)
            out += self.fields.propose(name, arguments)
            out += self.places.propose(name, line)
            out += self.aligned.propose(line)
            out += self.shell.propose(line)
            out += self.scope.propose(name, arguments, carried_known=self.inventory.known)
            out += self.inventory.propose(name, arguments)
        if self.config.use_memory and line in self.memory:
            remembered = self.memory[line]
            out.append(Proposal("memory", remembered, notes=["this action got this observation earlier in the episode"]))
            updated = self._rerender(name, arguments, remembered)
            if updated is not None and updated != remembered:
                out.append(Proposal("memory_state", updated, notes=[
                    "the earlier observation of this action in its own form, with the state as it is now"]))
        turn = len(self.history) + 1
        for proposal in out:  # an answer recalled from elsewhere prints this episode's turn count
            proposal.observation = self.counter.fix(proposal.observation, turn)
            refreshed = self.view_edits.refresh(proposal.observation) if proposal.source in _VIEWS else None
            if refreshed is not None:  # a place as last seen, changed since by what was done there
                proposal.observation = refreshed
                proposal.notes.append("the place as last seen, with the learned edits of what was done there since")
        return out, notes

    def _rerender(self, name: str, arguments: dict[str, Any], observation: str) -> str | None:
        """`observation` re-rendered from the form it fits (any rule of the action, whatever its status) with the
        current state: a revisit shows what changed since (an object taken away, a door opened)."""
        for rule in self.all_rules.get(name, []):
            if match_template(rule.template, observation, arguments) is not None:
                return render(rule.template, arguments, self.state, self.formats)
        return None

    def _predict(self, action: Action) -> Prediction:
        if not self.config.persistent_state:
            self.state = {}
        name, arguments, problems = self.canonical(action)
        audit = Audit(route="fast_path")
        if problems and any(p.startswith("unknown action") for p in problems) and not self.rules.get(name):
            proposals, _ = self.proposals(action, name, arguments)  # episode state may know an unseen command
            chosen, why = choose_route(self.routes, name, proposals) if self.config.fallback else (None, [])
            if chosen is None:
                return self._fallback(action, name, arguments, audit, [*problems, *why],
                                      outcome="failure:unknown_action")
            audit.route = ROUTE_NAMES.get(chosen.source, f"state:{chosen.source}")
            audit.notes.extend([*problems, *why, *chosen.notes])
            outcome = "failure:unknown_action" if chosen.source == "memory" else chosen.outcome
            return self._transition(action, name, arguments, chosen.observation, outcome, [], audit, from_rule=False)
        if problems and self.config.strict_schema:
            return Prediction(observation=self._generic_failure(), outcome="failure:invalid_arguments",
                              state=copy.deepcopy(self.state), audit=Audit(route="rejected", notes=problems))
        audit.notes.extend(f"schema: {problem} (answered anyway: the schema was learned)" for problem in problems)
        proposals, notes = self.proposals(action, name, arguments)
        audit.notes.extend(notes)
        rule_proposal = next((p for p in proposals if p.source == "rule"), None)
        if rule_proposal is not None:
            audit.conflicts = list(rule_proposal.conflicts)
        chosen, why = choose_route(self.routes, name, proposals) if self.config.fallback else (rule_proposal, [])
        if chosen is None and rule_proposal is None and self.llm is not None:
            from worldsmith.sim.agent import run_agent  # the agent route: a brief and a bounded tool loop

            submitted = run_agent(self, action, name, arguments, audit)
            if submitted is not None:
                return self._transition(action, name, arguments, submitted.observation, submitted.outcome,
                                        submitted.effects, audit, from_rule=False)
        if chosen is None:
            return self._fallback(action, name, arguments, audit, why)
        audit.notes.extend([*why, *chosen.notes])
        audit.records = list(chosen.records)
        if chosen.source == "rule":
            audit.rules = [chosen.rule] if chosen.rule else []
            return self._transition(action, name, arguments, chosen.observation, chosen.outcome, chosen.effects,
                                    audit, from_rule=True)
        audit.route = ROUTE_NAMES.get(chosen.source, f"state:{chosen.source}")
        return self._transition(action, name, arguments, chosen.observation, chosen.outcome, [], audit,
                                from_rule=False)

    def _generic_failure(self) -> str:
        return (self.nearest.generic_failure or "") if self.nearest is not None else ""

    def _fallback(self, action: Action, name: str, arguments: dict[str, Any], audit: Audit, notes: list[str],
                  outcome: str | None = None) -> Prediction:
        audit.notes.extend(notes)
        if not self.config.fallback:
            audit.route = "fallback:none"
            audit.notes.append("fallbacks are off (ablation)")
            return Prediction(observation="", outcome=outcome or "unknown", state=copy.deepcopy(self.state), audit=audit)
        if self.nearest is None:
            audit.route = "fallback:none"
            audit.notes.append("no rule, memory or evidence answers this action")
            return Prediction(observation="", outcome=outcome or "unknown", state=copy.deepcopy(self.state), audit=audit)
        nearest = self.nearest.nearest(Action(name=name, arguments=action.arguments, raw=action.raw))
        audit.route = nearest.audit.route
        audit.retrieved = nearest.audit.retrieved
        audit.notes.extend(nearest.audit.notes)
        observation = self.counter.fix(nearest.observation, len(self.history) + 1)
        return self._transition(action, name, arguments, observation, outcome or nearest.outcome, [], audit,
                                from_rule=False)

    def _suffixed(self, name: str, arguments: dict[str, Any], action: Action, observation: str, audit: Audit) -> str:
        """The answer with its learned trailing line added or removed (`sim.suffixes`), where the route table's
        held-out record of such adjustments for this action is not worse than leaving answers alone."""
        if self.routes is None or not self.suffixes.applies(name):
            return observation
        stats = self.routes.stats(name, "suffix", pooled=False)
        if stats is None or not stats.not_worse_than_nearest:
            return observation
        adjusted = self.suffixes.adjust(name, arguments, action_line(action), observation)
        if adjusted is None:
            return observation
        audit.notes.append(f"trailing line {adjusted[1]}")
        return adjusted[0]

    def _transition(self, action: Action, name: str, arguments: dict[str, Any], observation: str, outcome: str,
                    effects: list[Effect], audit: Audit, *, from_rule: bool) -> Prediction:
        """Validate the proposed effects on a copy, then read the answered observation back into state."""
        observation = self._suffixed(name, arguments, action, observation, audit)
        accepted: list[Effect] = []
        if effects:
            problems = schema_problems(self.book, effects, arguments)
            if not from_rule and self.config.trust_policy == "rules_only":
                problems = ["trust policy rules_only: effects need a supporting rule", *problems]
            try:
                apply_effects(self.state, effects, arguments, self.formats)
            except EffectError as error:
                problems.append(str(error))
            if problems:
                audit.rejected_effects = [{"effect": e.model_dump(mode="json"), "why": problems} for e in effects]
                audit.notes.append("effects rejected: observation only, state unchanged by them")
            else:
                accepted = effects
                if not from_rule:
                    audit.notes.append("schema-checked effects accepted without a supporting rule (flagged)")
        try:
            state, _ = self._after(name, arguments, action, observation, self.state)
            if accepted and not from_rule:
                state = apply_effects(state, accepted, arguments, self.formats)
        except EffectError as error:  # the state stays as it was; the observation still answers
            state = copy.deepcopy(self.state)
            audit.notes.append(f"state not updated: {error}")
        if outcome not in ("success", "unknown") and not outcome.startswith("failure"):
            outcome = "unknown"
        done = predicts_done(self.book.termination, name, observation) if self.config.knowledge else False
        return Prediction(observation=observation, effects=accepted, outcome=outcome, state=state, done=done,
                          audit=audit)
