"""The world-model harness (Trace2Env online): state, rules first, a model only where rules end.

One `predict`:

1. canonicalize the action through the action schema (`sim.canonical`: every spelling of a call one action;
   aliases, text commands split into named arguments) and type-check it (required arguments present);
2. check *every* executable rule of the action against the session state (no retrieval limit can
   hide one); equal-rank rules that both hold with different templates are a recorded conflict;
3. ask every registered answer source (`sim.sources`, in registration order) for its answer: the
   rule fast path (the chosen rule renders the observation from arguments and state), episode
   memory, places and the map, entity records, fields, scope, inventory, aligned evidence, the
   shell; each answer passes the post-processing hooks (turn counters set for this episode, a
   place's view refreshed with the `view_edits` source's edits); routing (`sim.routing`) picks
   one by the route table's held-out record, except that an answer a source vetoes is dropped (an answer about
   another entity than the one asked), and an authoritative answer from the session's own state comes first (`Answer.authoritative`: a record it
   answered, an id it said does not exist, an entity it invented);
   **model stage** where none was chosen and no rule rendered, when a model is attached: the agent
   route, a brief and a bounded tool loop (`sim.agent`), ending in a submitted transition;
   **fallback stage** otherwise: the closest evidence for the action adapted to the current
   arguments, marked as a fallback; the answer's trailing line is then adjusted where the route
   table says so (the `suffixes` source), and `Audit.source` names the answer that was used;
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

from worldsmith.llm.base import LLM
from worldsmith.sim.base import Audit, HistoryItem, Prediction, WorldModelBase, action_line
from worldsmith.sim.baselines import NearestEvidence
from worldsmith.sim.canonical import canonical_action, canonical_evidence
from worldsmith.sim.retrieval import action_arguments
from worldsmith.sim.routing import choose_route
from worldsmith.sim.sources.base import (
    Answer,
    AnswerSource,
    CandidateAnswer,
    SourceContext,
    SourceSpec,
    Step,
    Vetoing,
)
from worldsmith.sim.sources.registry import build_sources, source_specs
from worldsmith.sim.sources.suffixes import SuffixConditions
from worldsmith.sim.turn_counter import TurnCounter
from worldsmith.traces.model import Action
from worldsmith.worldbook.engine import EffectError, apply_effects, resolve_path
from worldsmith.worldbook.holdout import as_routed
from worldsmith.worldbook.model import Effect, Evidence, Rule, Worldbook, join_path
from worldsmith.worldbook.rule_replay import list_formats, observe_turn
from worldsmith.worldbook.summaries import EpisodeSummaries
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

    def __init__(self, book: Worldbook, *, llm: LLM | None = None, config: HarnessConfig = HarnessConfig(),
                 summaries: EpisodeSummaries | None = None) -> None:
        """`summaries`: per-episode pieces of an evidence list the book's evidence is a subset of (the cross-fit
        folds' harnesses share them: what a tracker learns from each episode is learned once)."""
        super().__init__()
        self.book = book
        self.action_schema = book.action_schema
        self.demoted = {demotion.rule: demotion for demotion in book.demotions}
        book = as_routed(book)  # rules the hold-out tests demoted answer where the route table says (holdout doc)
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
        evidence = canonical_evidence(book.evidence, book.action_schema) if config.knowledge else []
        self.counter = TurnCounter(evidence)
        self.specs: dict[str, SourceSpec] = source_specs()
        self.sources: dict[str, AnswerSource] = build_sources(
            SourceContext(book, evidence, config, self, self.rules, self.all_rules, self.formats,
                          summaries=summaries))
        self.answers: dict[str, Answer] = {a.name: a for spec in self.specs.values() for a in spec.answers}
        self._stages: dict[str, list[tuple[SourceSpec, AnswerSource]]] = {}
        for source_name, spec in self.specs.items():
            self._stages.setdefault(spec.stage, []).append((spec, self.sources[source_name]))
        self._refresh = getattr(self.sources.get("view_edits"), "refresh", None)  # the view-edits hook
        self.routes = book.routes if config.knowledge else None
        self.vetoing = [source for source in self.sources.values() if isinstance(source, Vetoing)]
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

    def source(self, name: str) -> AnswerSource:
        """The built source registered as `name` (`sim.sources`)."""
        return self.sources[name]

    @property
    def nearest(self) -> NearestEvidence | None:
        """Nearest evidence on the book (the fallback source's; None without knowledge or evidence)."""
        return getattr(self.sources.get("nearest"), "nearest", None)

    @property
    def suffixes(self) -> SuffixConditions:
        """The learned trailing lines (the `suffixes` source's)."""
        return self.sources["suffixes"].tracker  # type: ignore[attr-defined]

    def current_step(self, action: Action, name: str, arguments: dict[str, Any], audit: Audit | None = None) -> Step:
        """The step `action` is now, as the sources see it."""
        return Step(action=action, name=name, arguments=arguments, line=action_line(action),
                    turn=len(self.history) + 1, state=self.state, audit=audit)

    def _on_start(self) -> None:
        """Rebuild state and every source by reading the observed prefix."""
        for source in self.sources.values():
            source.reset(self.initial_observation)
        for item in self.history:
            self._observe_item(item.action, item.observation)

    def _observe_item(self, action: Action, observation: str) -> None:
        name, arguments, _ = self.canonical(action)
        state, _ = self._after(name, arguments, action, observation, self.state)
        self._remember(action, name, arguments, observation)  # the sources see the state before the step
        self.state = state

    def _remember(self, action: Action, name: str, arguments: dict[str, Any], observation: str) -> None:
        step = self.current_step(action, name, arguments)
        for source in self.sources.values():
            source.observe(step, observation)

    def observe(self, action: Action | str | dict[str, Any], observation: str) -> None:
        """Teacher forcing: take a real (action, observation) into history, state and memory without predicting."""
        parsed = canonical_action(action, self.action_schema)
        self._observe_item(parsed, observation)
        self.history.append(HistoryItem(action=parsed, observation=observation))
        self._pending = None

    def _on_commit(self, action: Action, prediction: Prediction) -> None:
        name, arguments, _ = self.canonical(action)
        self._remember(action, name, arguments, prediction.observation)

    def tracked(self) -> dict[str, Any]:
        """What the sources believe now (place, map, entity records): for the audit and for people."""
        return {spec.snapshot_key: self.sources[name].snapshot() for name, spec in self.specs.items()
                if spec.snapshot_key is not None}

    # ------------------------------------------------------------------ predict
    def proposals(self, action: Action, name: str, arguments: dict[str, Any]) -> tuple[list[CandidateAnswer], list[str]]:
        """Every routed source's answer for this action now, in registration order, and notes on sources that gave
        none."""
        audit = Audit(route="fast_path")
        return self._proposals(self.current_step(action, name, arguments, audit)), audit.notes

    def _proposals(self, step: Step) -> list[CandidateAnswer]:
        out: list[CandidateAnswer] = []
        for _, source in self._stages.get("routed", ()):
            out += source.propose(step)
        self._post_process(out, step.turn)
        return [proposal for proposal in out if not self._vetoed(step, proposal)]

    def _vetoed(self, step: Step, proposal: CandidateAnswer) -> bool:
        """Whether a source refuses this answer (`Vetoing`): noted in the step's audit."""
        for source in self.vetoing:
            reason = source.veto(step, proposal.observation)
            if reason is not None:
                step.note(f"{proposal.source} not used: {reason}")
                return True
        return False

    def _authority(self, proposals: Sequence[CandidateAnswer]) -> CandidateAnswer | None:
        """The session's own state answers first (`Answer.authoritative`): the best-ranked such answer."""
        found = [(self.answers[p.source].rank, index, p) for index, p in enumerate(proposals)
                 if p.source in self.answers and self.answers[p.source].authoritative]
        return min(found)[2] if found else None

    def _post_process(self, proposals: list[CandidateAnswer], turn: int) -> None:
        """The hooks every answer passes: turn counters set for this episode (an answer recalled from elsewhere),
        a place's view refreshed with the learned edits of what was done there since (`view_edits`)."""
        refresh = self._refresh
        for proposal in proposals:
            answer = self.answers.get(proposal.source)
            if answer is None or answer.fix_turns:
                proposal.observation = self.counter.fix(proposal.observation, turn)
            refreshed = refresh(proposal.observation) if refresh is not None and answer is not None and answer.view \
                else None
            if refreshed is not None:
                proposal.observation = refreshed
                proposal.notes.append("the place as last seen, with the learned edits of what was done there since")

    def _last_resort(self, stage: str, step: Step, *, unseen: bool) -> CandidateAnswer | None:
        """The first answer of the sources of `stage` ("model" or "fallback"), post-processed; for an action the book
        has never seen (`unseen`), only from sources that take one."""
        for spec, source in self._stages.get(stage, ()):
            if unseen and not spec.unseen_actions:
                continue
            found = source.propose(step)
            if found:
                self._post_process(found[:1], step.turn)
                return found[0]
        return None

    def _route(self, proposal: CandidateAnswer) -> str:
        if proposal.route is not None:
            return proposal.route
        answer = self.answers.get(proposal.source)
        return answer.audit_route if answer is not None else f"state:{proposal.source}"

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
                                      outcome="failure:unknown_action", unseen=True)
            audit.notes.extend([*problems, *why, *chosen.notes])
            outcome = "failure:unknown_action" if chosen.source == "memory" else chosen.outcome
            return self._answered(action, name, arguments, chosen, audit, outcome=outcome, effects=[])
        if problems and self.config.strict_schema:
            return Prediction(observation=self._generic_failure(), outcome="failure:invalid_arguments",
                              state=copy.deepcopy(self.state), audit=Audit(route="rejected", notes=problems))
        audit.notes.extend(f"schema: {problem} (answered anyway: the schema was learned)" for problem in problems)
        step = self.current_step(action, name, arguments, audit)  # sources note in the audit why they gave none
        proposals = self._proposals(step)
        rule_proposal = next((p for p in proposals if p.source == "rule"), None)
        if rule_proposal is not None:
            audit.conflicts = list(rule_proposal.conflicts)
        chosen = self._authority(proposals)
        if chosen is not None:
            why = [f"{chosen.source}: the session's own state answers"]
        else:
            chosen, why = choose_route(self.routes, name, proposals) if self.config.fallback else (rule_proposal, [])
        if chosen is None and rule_proposal is None:  # the model stage: only where no other source answered
            submitted = self._last_resort("model", step, unseen=False)
            if submitted is not None:
                return self._answered(action, name, arguments, submitted, audit, outcome=submitted.outcome,
                                      effects=submitted.effects)
        if chosen is None:
            return self._fallback(action, name, arguments, audit, why, step=step, alternatives=proposals)
        audit.notes.extend([*why, *chosen.notes])
        if chosen.source == "rule":
            audit.rules = [chosen.rule] if chosen.rule else []
            return self._answered(action, name, arguments, chosen, audit, outcome=chosen.outcome,
                                  effects=chosen.effects, from_rule=True)
        return self._answered(action, name, arguments, chosen, audit, outcome=chosen.outcome, effects=[])

    def _answered(self, action: Action, name: str, arguments: dict[str, Any], answer: CandidateAnswer, audit: Audit, *,
                  outcome: str, effects: list[Effect], from_rule: bool = False) -> Prediction:
        """The prediction of the chosen answer: its source and route in the audit, then the transition."""
        audit.route = self._route(answer)
        audit.source = answer.source
        audit.records = list(answer.records)
        demotion = self.demoted.get(answer.rule) if answer.rule is not None else None
        if demotion is not None:
            audit.notes.append(f"{answer.rule} is tentative ({'; '.join(demotion.reasons)}); it answered because "
                               "the route table's held-out record for this action let it")
        return self._transition(action, name, arguments, answer.observation, outcome, effects, audit,
                                from_rule=from_rule)

    def _generic_failure(self) -> str:
        return (self.nearest.generic_failure or "") if self.nearest is not None else ""

    def _fallback(self, action: Action, name: str, arguments: dict[str, Any], audit: Audit, notes: list[str],
                  outcome: str | None = None, *, unseen: bool = False, step: Step | None = None,
                  alternatives: Sequence[CandidateAnswer] = ()) -> Prediction:
        """The fallback stage's answer (nearest evidence), or no answer at all (`fallback:none`). A fallback a source
        vetoes gives way to the best-ranked authoritative one of `alternatives` (an invented record, say)."""
        audit.notes.extend(notes)
        step = step if step is not None else self.current_step(action, name, arguments, audit)
        if unseen:  # an action the book has never seen: only model-stage sources that take unseen actions
            submitted = self._last_resort("model", step, unseen=True)
            if submitted is not None:
                return self._answered(action, name, arguments, submitted, audit, outcome=outcome or submitted.outcome,
                                      effects=submitted.effects)
        found = self._last_resort("fallback", step, unseen=unseen)
        if found is not None and self._vetoed(step, found):
            instead = self._authority(alternatives)
            if instead is not None:
                return self._answered(action, name, arguments, instead, audit, outcome=instead.outcome, effects=[])
            found = None
        if found is None:
            audit.route = "fallback:none"
            audit.notes.append("fallbacks are off (ablation)" if not self.config.fallback
                               else "no rule, memory or evidence answers this action")
            return Prediction(observation="", outcome=outcome or "unknown", state=copy.deepcopy(self.state), audit=audit)
        audit.retrieved = found.retrieved
        audit.notes.extend(found.notes)
        return self._answered(action, name, arguments, found, audit, outcome=outcome or found.outcome, effects=[])

    def _suffixed(self, name: str, arguments: dict[str, Any], action: Action, observation: str, audit: Audit) -> str:
        """The answer with its learned trailing line added or removed (the `suffixes` source), where the route
        table's held-out record of such adjustments for this action is not worse than leaving answers alone."""
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
