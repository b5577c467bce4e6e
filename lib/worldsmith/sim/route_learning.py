"""The route table (`Worldbook.routes`) as a stage `sim` adds after the book's own: a simulator's book is
`build_simulator_book(...)` = the worldbook's stages + `RouteStage`, run as one declared pipeline.

The table is measured by cross-fitting the construction trajectories over trajectory families: for each fold, a
harness on a book of the other folds replays the fold's trajectories with teacher forcing, and every answer source
is scored beside nearest evidence (`sim.routing.choose_route` reads the table). The fold books are not rebuilt from
scratch: the candidate rules and templates the build induced once over all construction trajectories are reused and
only re-reviewed per fold.

How a fold's book is kept free of the held-out fold (`fold_book`):

- **evidence** is the kept folds' transitions only (the held-out episodes' turns are dropped), and everything the
  harness derives from evidence (nearest evidence, place/entity/field/inventory/scope trackers, suffixes, memory
  forms) is built from that evidence alone;
- **candidates** carry every turn that formed their template (`InducedRules.origins`); a candidate none of whose
  origin turns is in a kept episode (only the held-out fold produced it) is dropped, and the others start the review
  with their kept origin turns as provenance;
- **support, statuses, counterexamples, narrowing and entity keying** come from `review_rules` over the kept
  evidence only, exactly as a build on the kept folds would review (min_support and min_share count kept turns: a
  candidate whose kept support falls below min_support is not supported in the fold, whatever the held-out fold
  showed); the list format is learned from kept observations;
- the action schema, state schema and termination are induced from the kept evidence and the fold's reviewed rules.

Past `ROUTE_FLOOR_TURNS` construction turns the table is measured on a sample (`route_sample`): trajectory families
in the fixed hashed fold order until `route_budget` turns (`ROUTE_SHARE` of the construction, at most
`ROUTE_TURNS`), plus families of actions the sample holds fewer than `MIN_ACTION_TURNS` turns of. The sampled
families are dealt over as few folds as keep each fold's book about as large as a full cross-fit's (one held-out
split once the sample is at most 1/`folds` of the turns); every family outside the sample is in every fold's book.
Leakage is kept out the same way: a fold's book is `fold_book` over every episode but that fold's, so no held-out
turn reaches the book that answers it. What changes is only how many turns the table counts; the stage's cost then
stops growing with the construction beyond one or two fold books (`benchmarks/route_sample.py` measures the held-out
fidelity of sampled against full tables).

Each fold makes its own table, merged in fold order (`RouteTable.absorb`): the same table whether the folds run in
one process or in a pool of `workers` (`util.executors`). Work shared across the folds of one process, none of which
lets a held-out episode reach a fold: a `MatchMemo` (what a turn's
observation shows and which templates it fits: a function of that turn alone), a `ReplayCache` (an episode's replay
results, reused only for the same episode under rules its replay reads alike: a function of that episode and the
fold's own rules), and `EpisodeSummaries` (what each episode adds to a learner, e.g. its selector votes, combined
over the fold's kept episodes only, in evidence order: equal to learning on the kept episodes alone).

What the held-out fold can still shape is a kept candidate's text: the words of its template (two observations
merged into one template with a free slot), its conditions and its effects (votes and confirmations counted over
all trajectories), as for any rule of the final book. Supports, statuses and every tracker the fold's harness
consults are the kept folds' own (`tests/sim/test_route_learning.py` fails if held-out evidence leaks into them).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.sim.base import action_line
from worldsmith.sim.harness import Harness
from worldsmith.sim.scoring import exact_match
from worldsmith.sim.sources.base import CandidateAnswer
from worldsmith.traces.model import Action, Episode
from worldsmith.util.executors import make_executor
from worldsmith.worldbook.book_stages import BOOK_STAGES, review_config
from worldsmith.worldbook.build import (
    BuildConfig,
    BuildResult,
    build_worldbook,
    families_in_fold_order,
    family_folds,
    trajectory_family,
)
from worldsmith.worldbook.facts import learn_list_format
from worldsmith.worldbook.holdout import rule_key
from worldsmith.worldbook.induce import InducedRules, episode_of
from worldsmith.worldbook.lookup_rules import rule_id as lookup_rule_id
from worldsmith.worldbook.model import Evidence, Rule, RuleProvenance, Worldbook
from worldsmith.worldbook.pipeline import Artifacts, BuildContext, ProgressCallback, Stage, with_stage
from worldsmith.worldbook.route_table import RouteTable
from worldsmith.worldbook.rule_replay import MatchMemo, ReplayCache, review_rules
from worldsmith.worldbook.schema import induce_action_schema, induce_state_schema
from worldsmith.worldbook.summaries import EpisodeSummaries
from worldsmith.worldbook.termination import learn_termination
from worldsmith.worldbook.writes import learn_tool_rules

__all__ = ["MIN_ACTION_TURNS", "MIN_POOL_TURNS", "ROUTE_FLOOR_TURNS", "ROUTE_SHARE", "ROUTE_TURNS", "SIMULATOR_STAGES", "RouteStage",
           "build_simulator_book", "fold_book", "learn_routes", "route_budget", "route_fold_assignment",
           "route_sample", "simulator_stages"]

_MAX_PROVENANCE = 50  # as induction caps a candidate's provenance


ROUTE_TURNS = 12_000
"""The most held-out turns a route table is measured on: past it the stage's cost stops growing with the
construction beyond one fold book (and the replay of this many turns)."""

ROUTE_FLOOR_TURNS = 3_000
"""A construction of at most this many turns is measured on every turn, as a full cross-fit."""

ROUTE_SHARE = 0.4
"""Between the floor and `ROUTE_TURNS`, the share of the construction's turns the table is measured on: two of five
folds' worth, each fold book as large as a five-fold cross-fit's. Measured: on 3,000 tool-API trajectories a table
on 3,300 turns (13%) answered 0.8 points fewer held-out turns exactly than the full cross-fit
(`benchmarks/route_sample.py`); rows near a decision need more turns than a fixed small budget gives."""

MIN_ACTION_TURNS = 20
"""Past the budget, a family is still sampled while it calls an action the sample holds fewer turns of than this,
so a rare action keeps its own row (`RouteTable.min_turns` decides when a row speaks)."""


MIN_POOL_TURNS = 2_000
"""Below this many construction turns the folds run in this process whatever `workers` says: a pool's workers each
start Python and import the package (a few CPU seconds and ~150 MB each), more than such folds take."""


@dataclass(frozen=True)
class RouteStage:
    """The route-table stage: cross-fits the construction episodes over `folds` trajectory families (fewer
    families than folds: as many folds as families; under 2: no table), on about `max_turns` held-out turns
    (`route_sample`; None: every turn)."""

    folds: int = 5
    max_turns: int | None = ROUTE_TURNS
    workers: int = 1  # processes the folds run in: the table is the same for any number (not a setting)
    name: str = "routes"
    inputs: tuple[str, ...] = ("episodes", "evidence", "rules")
    output: str = "routes"

    @property
    def output_type(self) -> Any:
        return RouteTable | None

    def settings(self) -> dict[str, Any]:
        return {"folds": self.folds, "max_turns": self.max_turns}

    def run(self, artifacts: Artifacts, context: BuildContext) -> RouteTable | None:
        return learn_routes(artifacts["episodes"], artifacts["evidence"], artifacts["rules"].deterministic,
                            context.config, folds=self.folds, max_turns=self.max_turns, workers=self.workers)


def simulator_stages(route_folds: int = 5, route_turns: int | None = ROUTE_TURNS,
                     workers: int = 1) -> tuple[Stage, ...]:
    """The book's stages with the route table measured before `compile` (route_folds < 2: the book's alone;
    `route_turns`: the held-out turns it is measured on, None: all; `workers`: processes its folds run in)."""
    if route_folds < 2:
        return BOOK_STAGES
    return with_stage(BOOK_STAGES, RouteStage(folds=route_folds, max_turns=route_turns, workers=workers),
                      before="compile")


SIMULATOR_STAGES = simulator_stages()


def build_simulator_book(episodes: Iterable[Episode], *, name: str, config: BuildConfig | None = None,
                         route_folds: int = 5, route_turns: int | None = ROUTE_TURNS,
                         validation: Iterable[Episode] | None = None,
                         cache_dir: str | Path | None = None, workspace_root: str | Path | None = None,
                         env_id: str | None = None, progress: ProgressCallback | None = None,
                         workers: int = 1) -> BuildResult:
    """A worldbook for simulation: `build_worldbook` with the route table (`route_folds` cross-fitting folds over
    about `route_turns` held-out turns, None: all; the folds in `workers` processes, the same book for any number)."""
    return build_worldbook(episodes, name=name, config=config or BuildConfig(), validation=validation, cache_dir=cache_dir,
                           workspace_root=workspace_root, env_id=env_id, progress=progress,
                           stages=simulator_stages(route_folds, route_turns, workers))


def route_budget(turns: int, max_turns: int | None = ROUTE_TURNS) -> int:
    """The held-out turns a construction of `turns` turns is measured on: `ROUTE_SHARE` of them, at least
    `ROUTE_FLOOR_TURNS` and at most `max_turns` (None: all)."""
    if max_turns is None:
        return turns
    return min(max_turns, max(ROUTE_FLOOR_TURNS, math.ceil(ROUTE_SHARE * turns)))


def route_sample(episodes: Sequence[Episode], max_turns: int | None = ROUTE_TURNS,
                 min_action_turns: int = MIN_ACTION_TURNS) -> list[str] | None:
    """The trajectory families a route table is measured on, in fold order; None when that is every family (no
    limit, or the construction is within its `route_budget`). Families are taken in the hashed fold order while
    the sample holds fewer turns than the budget, then only those calling an action the sample holds fewer than
    `min_action_turns` turns of: a prefix of a fixed pseudo-random order, plus what keeps rare actions measured."""
    total = sum(len(e.turns) for e in episodes)
    budget = route_budget(total, max_turns)
    if budget >= total:
        return None
    calls: dict[str, Counter[str]] = {}
    for episode in episodes:
        calls.setdefault(trajectory_family(episode), Counter()).update(turn.action.name for turn in episode.turns)
    sampled: list[str] = []
    held: Counter[str] = Counter()
    for family in families_in_fold_order(episodes):
        family_calls = calls[family]
        if held.total() < budget or any(held[action] < min_action_turns for action in family_calls):
            sampled.append(family)
            held.update(family_calls)
    return sampled


def route_fold_assignment(episodes: Sequence[Episode], folds: int,
                          max_turns: int | None = ROUTE_TURNS) -> dict[str, int]:
    """Each held-out family's fold. Every family, `family_folds`, while the construction is within `max_turns`
    turns; else the `route_sample` families dealt over as few folds as keep each fold's book about as large as a
    `folds`-fold cross-fit's (`route_budget`'s share of the turns times `folds`, rounded up): the families outside
    the sample are in every fold's book, and a sample of at most 1/`folds` of the turns is one held-out fold (the
    table needs every sampled turn held out once, not every family)."""
    sample = route_sample(episodes, max_turns)
    if sample is None:
        return family_folds(episodes, folds)
    turns = sum(len(e.turns) for e in episodes)
    share = route_budget(turns, max_turns) / turns  # the budget's share (the few rare-action families ride along)
    count = max(1, math.ceil(round(folds * share, 2)))
    return {family: index % count for index, family in enumerate(sample)}


def _fold_candidates(candidates: InducedRules, kept_turns: set[str]) -> list[Rule]:
    """The candidates a kept turn formed, their provenance cut to those turns."""
    out = []
    for rule in candidates.rules:
        origin = [turn for turn in candidates.origins.get(rule.id, []) if turn in kept_turns]
        if origin:
            out.append(rule.model_copy(update={
                "support": len(origin), "provenance": RuleProvenance.capped(origin, cap=_MAX_PROVENANCE)}))
    return out


def fold_book(evidence: Sequence[Evidence], candidates: InducedRules, kept_episodes: set[str],
              config: BuildConfig, families: Mapping[str, str] | None = None, *,
              memo: MatchMemo | None = None, cache: ReplayCache | None = None,
              summaries: EpisodeSummaries | None = None) -> Worldbook:
    """The book a fold's harness runs on: the kept episodes' evidence, the candidates they formed re-reviewed on
    that evidence, the schemas, termination and tool rules it shows (see the module docstring for what stays
    out); `families`: each episode's trajectory family, for the look-up rules; `memo`: template matches of
    `evidence`'s turns shared by the folds (a turn's match against a template is the same in every fold); `cache`:
    episodes' replay results shared by the folds (reused only where the fold's rules replay an episode alike);
    `summaries`: per-episode pieces of `evidence` (`worldbook.summaries`) the tool rules combine over the kept
    episodes."""
    kept = [item for item in evidence if episode_of(item.turn_id) in kept_episodes]
    rules = review_rules(_fold_candidates(candidates, {item.turn_id for item in kept}), kept, review_config(config),
                         formats={"*": learn_list_format((item.observation for item in kept), summaries=summaries)}, memo=memo,
                         cache=cache)
    return Worldbook(name="routes", action_schema=induce_action_schema(kept),
                     state_schema=induce_state_schema(kept, rules), rules=rules, evidence=kept,
                     termination=learn_termination(kept),
                     tool_rules=learn_tool_rules(kept, config, families=families, summaries=summaries)).canonical()


def learn_routes(episodes: Sequence[Episode], evidence: Sequence[Evidence], candidates: InducedRules,
                 config: BuildConfig, *, folds: int = 5, max_turns: int | None = ROUTE_TURNS,
                 workers: int = 1) -> RouteTable | None:
    """The route table by cross-fitting `episodes` over trajectory families (None with fewer than 2 families) on
    about `max_turns` held-out turns (`route_fold_assignment`): `evidence` and `candidates` are the build's, over all
    of `episodes`. Each fold makes its own table and the tables are merged in fold order (`RouteTable.absorb`), so
    with `workers` >= 2 the folds run in a process pool (`util.executors`) and the table is the one-process table,
    byte for byte."""
    folds = min(folds, len({trajectory_family(e) for e in episodes}))
    if folds < 2:
        return None
    assignment = route_fold_assignment(episodes, folds, max_turns)
    folds = max(assignment.values()) + 1
    job = FoldJob(episodes=list(episodes), evidence=list(evidence), candidates=candidates, config=config,
                  assignment=assignment)
    table = RouteTable(folds=folds)
    if workers < 2 or len(evidence) < MIN_POOL_TURNS:
        shared = _FoldShared()  # the folds of one process share what is the same in every fold
        for fold in range(folds):
            table.absorb(job.table(fold, shared))
        return table
    tables: dict[int, str] = {}
    for outcome in make_executor(min(workers, folds)).run(_fold_table, job, list(range(folds))):
        if outcome.kind != "ok":
            raise RuntimeError(f"route fold {outcome.index} failed: {outcome.message}") from outcome.error
        tables[outcome.index] = outcome.value
    for fold in range(folds):
        table.absorb(RouteTable.model_validate_json(tables[fold]))
    return table


class _FoldShared:
    """Work shared across the folds of one process, none of which lets a held-out episode reach a fold: a
    `MatchMemo` (what each turn shows and which templates it fits), a `ReplayCache` (an episode's replay under the
    same rules for its actions) and `EpisodeSummaries` (what each episode adds to a learner, combined over a fold's
    kept episodes)."""

    def __init__(self) -> None:
        self.memo = MatchMemo()
        self.cache = ReplayCache()
        self.summaries = EpisodeSummaries()


@dataclass(frozen=True)
class FoldJob:
    """What every fold of one route table reads (a process pool's workers get it once)."""

    episodes: list[Episode]
    evidence: list[Evidence]
    candidates: InducedRules
    config: BuildConfig
    assignment: dict[str, int]  # held-out family -> its fold

    def table(self, fold: int, shared: _FoldShared) -> RouteTable:
        """The table of one fold's held-out turns, replayed on a book of every other episode."""
        families = {e.id: trajectory_family(e) for e in self.episodes}
        held = [e for e in self.episodes if self.assignment.get(families[e.id]) == fold]
        kept = {e.id for e in self.episodes if self.assignment.get(families[e.id]) != fold}
        book = fold_book(self.evidence, self.candidates, kept, self.config, families, memo=shared.memo,
                         cache=shared.cache, summaries=shared.summaries)
        table = RouteTable()
        _replay_fold(table, Harness(book, summaries=shared.summaries), held, _rule_keys(book))
        return table


def _fold_table(job: FoldJob, fold: int) -> str:
    """A pool worker's unit: one fold's table, as JSON (what comes back is data, read by the model's validator)."""
    return job.table(fold, _FoldShared()).model_dump_json()


def _rule_keys(book: Worldbook) -> dict[str, str]:
    """A fold book's rule and tool rule ids -> their `holdout.rule_key` (the same rule's key in the final book)."""
    return {**{rule.id: rule_key(rule) for rule in book.rules},
            **{f"tool:{rule.id}": rule_key(rule) for rule in book.tool_rules}}


def _answering_rule(proposal: CandidateAnswer, name: str, keys: Mapping[str, str]) -> str | None:
    """The key of the rule that gave `proposal`, if a rule did: a text rule (source `rule`), else a tool rule by the
    id the source names, or an action's query rule (the `query` source answers with its action's one query)."""
    if proposal.source == "rule" and proposal.rule is not None:
        return keys.get(proposal.rule)
    if proposal.rule is not None:
        return keys.get(f"tool:{proposal.rule}")
    if proposal.source == "query":
        return keys.get(f"tool:{lookup_rule_id('query', name)}")
    return None


def _replay_fold(table: RouteTable, harness: Harness, held: Sequence[Episode], keys: Mapping[str, str]) -> None:
    """Every held-out turn, teacher-forced: each source's answer scored beside nearest evidence's, and each rule
    that answered (`keys`: rule ids -> `holdout.rule_key`) scored in `RouteTable.rules`."""
    nearest = harness.nearest  # the baseline every source is scored against
    for episode in held:
        harness.start(episode.model_copy(update={"turns": []}))
        for turn in episode.turns:
            reference = turn.observation.text
            name, arguments, _ = harness.canonical(turn.action)
            proposals, _ = harness.proposals(turn.action, name, arguments)
            nearest_exact = None
            answer = nearest.nearest(turn.action).observation if nearest is not None else None
            if answer is not None:
                nearest_exact = bool(exact_match(answer, reference))
            if harness.suffixes.applies(name):
                bases = {proposal.observation for proposal in proposals}
                if answer is not None:
                    bases.add(answer)
                _record_suffixes(table, harness, turn.action, name, arguments, bases, reference)
            exact: dict[str, tuple[str, bool]] = {}
            answering: dict[str, bool] = {}
            for proposal in proposals:
                key = _answering_rule(proposal, name, keys)
                if key is not None:
                    answering[key] = answering.get(key, False) or bool(exact_match(proposal.observation, reference))
                if proposal.key not in exact:
                    right = bool(exact_match(proposal.observation, reference))
                    exact[proposal.key] = (proposal.observation, right)
                    table.record(name, proposal.key, right, nearest_exact)
                    if proposal.key != proposal.source:
                        table.record(name, proposal.source, right, nearest_exact)
            for winner, (said, right) in exact.items():
                for loser, (other, wrong) in exact.items():
                    if right and not wrong and said != other:
                        table.record_duel(name, winner, loser)
            for key, right in answering.items():
                table.record_rule(key, right)
            table.turns += 1
            harness.observe(turn.action, reference)


def _record_suffixes(table: RouteTable, harness: Harness, action: Action, name: str, arguments: dict[str, Any],
                     bases: set[str], reference: str) -> None:
    """Each answer the turn could get, with its learned trailing line added or removed, against itself unchanged:
    the `suffix` row says whether adjusting helps this action held out."""
    line = action_line(action)
    for base in sorted(bases):
        adjusted = harness.suffixes.adjust(name, arguments, line, base)
        if adjusted is not None:
            table.record(name, "suffix", bool(exact_match(adjusted[0], reference)), bool(exact_match(base, reference)))
