"""Baseline world models: what the harness is measured against.

- `NearestEvidence`: no model; the recorded transition of the same action whose command is
  lexically nearest, its observation adapted to the current arguments through its template.
- `DirectPrompting`: a model given the history and the action writes the next observation.
- `TraceRAG`: the same, plus the top-k recorded transitions retrieved for the action.
- `WorldbookPrompting`: the same, plus the worldbook rendered into the prompt.

The model baselines fit their prompt to the model's context window (the oldest history and the
least useful context cut first, what was cut in the audit's `prompt_fit` and notes), so a long
log never overflows it. A model baseline whose call fails, whose prompt cannot fit even so, or
whose reply is empty answers through nearest evidence when
it was given evidence (route `fallback:nearest_evidence`, the reason in the audit notes), else
with an empty observation and outcome `unknown`: a clear outcome, never an exception.
"""

from __future__ import annotations

import heapq
import inspect
import itertools
from collections import Counter
from collections.abc import Collection, Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from worldsmith.llm.base import LLM, Completion, LLMError, Message
from worldsmith.llm.budget import PromptBudget, PromptPreamble, prompt_budget
from worldsmith.sim.base import Audit, Prediction, WorldModelBase, action_line
from worldsmith.sim.prompts import (
    BOOK_SECTION,
    RAG_SECTION,
    PromptContext,
    PromptFit,
    episode_preamble,
    fit_simulator_messages,
    parse_observation,
    render_worldbook,
)
from worldsmith.sim.retrieval import EvidenceScorer, ScoredEvidence, action_arguments
from worldsmith.traces.model import Action, Episode
from worldsmith.worldbook.model import Evidence, Worldbook
from worldsmith.worldbook.templates import make_template, render_template
from worldsmith.worldbook.termination import predicts_done

__all__ = ["DirectPrompting", "NearestEvidence", "Searcher", "TraceRAG", "WorldbookPrompting"]


def _evidence_of(source: Worldbook | Sequence[Evidence]) -> list[Evidence]:
    return list(source.evidence) if isinstance(source, Worldbook) else list(source)


def _outcome(evidence: Evidence) -> str:
    return {"success": "success", "failure": "failure"}.get(evidence.outcome or "", "unknown")


def _query(action: Action) -> str:
    values = [str(v) for v in action_arguments(action).values() if isinstance(v, (str, int, float))]
    return " ".join([action_line(action), *values])


_MAX_ANSWERS = 100_000  # look-ups a NearestEvidence remembers


class _Group:
    """Items of one action with the same words and shape (argument names): they score alike for any query."""

    __slots__ = ("members", "ordered", "roles")

    def __init__(self, roles: frozenset[str], ordered: list[tuple[int, int]]) -> None:
        self.roles = roles
        self.ordered = ordered  # (-support, position), ascending: the members' order within the group
        self.members = [position for _, position in ordered]


class _GroupIndex:
    """One action's groups as postings (word -> the groups holding it, and how often) with each group's word count:
    every group's score and extra words for a query in a few numpy operations. The scores add each query word's
    part in the query's word order, as `EvidenceScorer.overlaps` does, so they are the same floats."""

    def __init__(self, scorer: EvidenceScorer, groups: Sequence[_Group]) -> None:
        postings: dict[str, tuple[list[int], list[int]]] = {}
        for at, group in enumerate(groups):
            for word, count in scorer.words(group.members[0]).items():
                rows, counts = postings.setdefault(word, ([], []))
                rows.append(at)
                counts.append(count)
        self.postings = {word: (np.array(rows, dtype=np.int64), np.array(counts, dtype=np.int64))
                         for word, (rows, counts) in postings.items()}
        self.sizes = np.array([scorer.size(group.members[0]) for group in groups], dtype=np.int64)
        shapes: dict[frozenset[str], int] = {}
        self.shape_ids = np.array([shapes.setdefault(group.roles, len(shapes)) for group in groups], dtype=np.int64)
        self.shapes = shapes

    def scores(self, terms: Sequence[tuple[str, int, float]]) -> tuple[list[float], list[int]]:
        """(score, extra words) of every group for `terms` (`EvidenceScorer.terms`), as Python numbers."""
        scores = np.zeros(len(self.sizes), dtype=np.float64)
        shared = np.zeros(len(self.sizes), dtype=np.int64)
        for word, count, weight in terms:
            found = self.postings.get(word)
            if found is not None:
                rows, have = found
                scores[rows] += np.minimum(count, have) * weight
                shared[rows] += have
        return scores.tolist(), (self.sizes - shared).tolist()

    def mismatch(self, shape: frozenset[str] | None) -> list[bool]:
        """Per group: whether its shape differs from `shape` (all False without one)."""
        if shape is None:
            return [False] * len(self.sizes)
        return (self.shape_ids != self.shapes.get(shape, -1)).tolist()


def _best_groups(scores: list[float], mismatch: list[bool], count: int) -> tuple[Iterable[int], tuple[bool, float] | None]:
    """(about `count` groups with the best (shape, score), a bound): every member of a group not chosen has a key
    whose (shape mismatch, -rounded score) is at least the bound (None: every group is chosen)."""
    if len(scores) <= count:
        return range(len(scores)), None
    values, differs = np.array(scores), np.array(mismatch)
    chosen: list[int] = []
    for cls in (False, True):
        rows = np.flatnonzero(differs == cls)
        if not len(rows):
            continue
        room = count - len(chosen)
        if room == 0 or len(rows) > room:
            order = np.argpartition(-values[rows], room) if room else None
            taken = rows[order[:room]] if order is not None else rows[:0]
            rest = rows[order[room:]] if order is not None else rows
            chosen += taken.tolist()
            return chosen, (cls, -round(float(values[rest].max()), 6))
        chosen += rows.tolist()
    return chosen, None


class NearestEvidence(WorldModelBase):
    """The lexically nearest evidence of the same action, adapted to the current arguments (no model).

    Candidates are ranked by word overlap with the action, then by how many of the action's
    turns share their observation template (a common answer beats an odd one), then by length.
    With `same_shape_first` (the harness's fallback), candidates of the action's shape (the same
    argument names: `take X from Y` is not `take X`) come before all others; the `nearest`
    baseline keeps the plain ranking, so its numbers stay comparable across versions.
    An action name with no evidence (an unknown action) gets outcome `failure:unknown_action`
    and the environment's generic failure text, when one failure observation answers several
    different actions in the evidence ("Nothing happens."), else an empty observation.
    """

    name = "nearest_evidence"
    route = "fallback:nearest_evidence"
    candidates = 64  # the best-scored groups a look-up merges first (the order never depends on it, only the cost)

    def __init__(self, evidence: Worldbook | Sequence[Evidence], *, k: int = 5, same_shape_first: bool = False) -> None:
        super().__init__()
        self.same_shape_first = same_shape_first
        self.book = evidence if isinstance(evidence, Worldbook) else None
        self.action_schema = self.book.action_schema if self.book is not None else None
        self.scorer = EvidenceScorer(_evidence_of(evidence))
        self.k = k
        self._templates: dict[str, str] = {}
        self._roles: dict[str, frozenset[str]] = {}  # the argument names each item gives: its shape
        self._support: Counter[tuple[str, str]] = Counter()
        failures: dict[str, set[str]] = {}
        for item in self.scorer.evidence:
            template = make_template(item.arguments if isinstance(item.arguments, dict) else {}, item.observation)
            self._templates[item.turn_id] = template
            self._roles[item.turn_id] = frozenset(item.arguments) if isinstance(item.arguments, dict) else frozenset()
            self._support[(item.action, template)] += 1
            if item.outcome == "failure":
                failures.setdefault(item.observation, set()).add(item.action)
        # per position (a repeated turn id reads its last item's, as the dicts above keep): the ranking's keys
        self._template_at = [self._templates[item.turn_id] for item in self.scorer.evidence]
        self._roles_at = [self._roles[item.turn_id] for item in self.scorer.evidence]
        self._support_at = [self._support[(item.action, template)]
                            for item, template in zip(self.scorer.evidence, self._template_at, strict=True)]
        self._groups: dict[str, list[_Group]] = {}  # per action, built on its first look-up
        self._indexes: dict[str, _GroupIndex] = {}  # per action: its groups' words as postings
        self._answers: dict[tuple[Any, ...], tuple[str, str, list[dict[str, Any]], list[str]]] = {}
        generic = sorted((-len(actions), text) for text, actions in failures.items() if len(actions) >= 2)
        self.generic_failure: str | None = generic[0][1] if generic else None

    def _canonical(self, name: str) -> str:
        if self.book is not None and name not in self.scorer.actions():
            spec = self.book.action_schema.get(name)
            if spec is not None:
                return spec.name
        return name

    def _predict(self, action: Action) -> Prediction:
        return self.nearest(action)

    def ends(self, action_name: str, observation: str) -> bool:
        """Whether the book's learned termination says this observation ends the episode (False without one)."""
        return self.book is not None and predicts_done(self.book.termination, self._canonical(action_name), observation)

    def nearest(self, action: Action, *, notes: Sequence[str] = (), avoid: Collection[str] = ()) -> Prediction:
        """The prediction for `action` (also the model baselines' fallback); `notes` go into its audit, and `done`
        follows the book's learned termination. An adapted answer in `avoid` (one the episode contradicts) is
        passed over for the next candidate, unless every candidate gives one."""
        prediction = self._nearest(action, notes, frozenset(avoid))
        prediction.done = self.ends(action.name, prediction.observation)
        return prediction

    def _nearest(self, action: Action, notes: Sequence[str], avoid: frozenset[str] = frozenset()) -> Prediction:
        name = self._canonical(action.name)
        arguments = action_arguments(action)
        shape = frozenset(arguments) if self.same_shape_first else None
        query = _query(action)
        # the answer depends on nothing but these (a replay asks the same look-up again and again: worked out once)
        key = (action.name, name, query, shape, repr(arguments), avoid)
        found = self._answers.get(key)
        if found is None:
            if len(self._answers) >= _MAX_ANSWERS:  # a long session's look-ups: start over rather than grow
                self._answers.clear()
            found = self._answers[key] = self._answer(action.name, name, query, shape, arguments, avoid)
        observation, outcome, retrieved, added = found
        audit = Audit(route=self.route, source="nearest_evidence", retrieved=[dict(hit) for hit in retrieved],
                      notes=[*notes, *added])
        return Prediction(observation=observation, outcome=outcome, audit=audit)

    def _answer(self, given: str, name: str, query: str, shape: frozenset[str] | None, arguments: dict[str, Any],
                avoid: frozenset[str] = frozenset()) -> tuple[str, str, list[dict[str, Any]], list[str]]:
        """(observation, outcome, the hits retrieved, the audit's notes) of one look-up."""
        ordered = self._ranked(query, name, shape)
        ranked = list(itertools.islice(ordered, self.k))
        evidence = self.scorer.evidence
        retrieved = [ScoredEvidence(evidence[position], score, extra).to_json() for position, score, extra in ranked]
        if not ranked:
            if self.generic_failure is None:
                return "", "failure:unknown_action", retrieved, [f"no evidence for action {given!r}"]
            return self.generic_failure, "failure:unknown_action", retrieved, [
                f"no evidence for action {given!r}", "answered with the failure text several actions share"]
        passed: tuple[int, str] | None = None  # the first adapted answer `avoid` holds
        for position, _, _ in itertools.chain(ranked, ordered):
            rendered = render_template(self._template_at[position], arguments)
            if rendered is not None and rendered in avoid:
                passed = passed or (position, rendered)
                continue
            if rendered is not None:
                skipped = [] if passed is None else [
                    f"passed over {evidence[passed[0]].turn_id}: this episode contradicts it"]
                return rendered, _outcome(evidence[position]), retrieved, [
                    *skipped, f"adapted {evidence[position].turn_id} to the current arguments"]
        if passed is not None:
            return passed[1], _outcome(evidence[passed[0]]), retrieved, [
                f"adapted {evidence[passed[0]].turn_id} to the current arguments"]
        best = evidence[ranked[0][0]]
        return best.observation, _outcome(best), retrieved, [
            f"no template of the nearest evidence fits these arguments: {best.turn_id} verbatim"]

    def _ranked(self, query: str, name: str, shape: frozenset[str] | None) -> Iterator[tuple[int, float, int]]:
        """`name`'s items as (position, score, extra), nearest first: same shape (when `shape`), rounded score, more
        of the action's turns sharing the template, fewer extra words, score, earlier. Items with the same words
        and shape score alike, so each such group is scored once (`_GroupIndex`: postings in numpy, not a Python
        loop over every group), and only the `candidates` best groups enter the lazy merge: a look-up costs little
        more than the postings of the query's words, where a merge of every group made the cross-fit grow with the
        square of the evidence. Past those groups' members that provably come first, the merge of every group
        takes over where they stopped, so the order is exactly the full sort's."""
        groups = self._action_groups(name)
        if not groups:
            return
        index = self._group_index(name, groups)
        terms = self.scorer.terms(query)
        scores, extras = index.scores(terms)
        mismatch = index.mismatch(shape)
        chosen, bound = _best_groups(scores, mismatch, self.candidates)
        yielded = 0
        for entry in self._merge(groups, chosen, scores, extras, mismatch):
            if bound is not None and (entry[0][0], entry[0][1]) >= bound:
                break  # a group outside the chosen ones may come next: the full merge decides from here
            yield entry[1]
            yielded += 1
        if bound is None:
            return
        everything = range(len(groups))
        yield from (entry[1] for entry in itertools.islice(
            self._merge(groups, everything, scores, extras, mismatch), yielded, None))

    @staticmethod
    def _merge(groups: Sequence[_Group], chosen: Iterable[int], scores: Sequence[float], extras: Sequence[int],
               mismatch: Sequence[bool]) -> Iterator[tuple[tuple[Any, ...], tuple[int, float, int]]]:
        """The members of the `chosen` groups as (the ranking's key, (position, score, extra)), in key order: a heap
        of each group's next member, merged lazily (each group's members are already in order)."""
        heap = []
        for at in chosen:
            score, extra = scores[at], extras[at]
            negative_support, position = groups[at].ordered[0]
            heap.append(((mismatch[at], -round(score, 6), negative_support, extra, -score, position), at, 0))
        heapq.heapify(heap)
        while heap:
            key, at, member = heap[0]
            score, extra = scores[at], extras[at]
            yield key, (key[-1], score, extra)
            ordered = groups[at].ordered
            if member + 1 < len(ordered):
                negative_support, position = ordered[member + 1]
                heapq.heapreplace(heap, ((key[0], key[1], negative_support, extra, -score, position), at, member + 1))
            else:
                heapq.heappop(heap)

    def _group_index(self, name: str, groups: Sequence[_Group]) -> _GroupIndex:
        index = self._indexes.get(name)
        if index is None:
            index = self._indexes[name] = _GroupIndex(self.scorer, groups)
        return index

    def _action_groups(self, name: str) -> list[_Group]:
        """`name`'s items grouped by their words and shape, each group's members by (more support, earlier)."""
        groups = self._groups.get(name)
        if groups is None:
            members: dict[tuple[Any, ...], list[int]] = {}
            for position in self.scorer.positions(name):
                words = tuple(sorted(self.scorer.words(position).items()))
                members.setdefault((words, self._roles_at[position]), []).append(position)
            support = self._support_at
            groups = self._groups[name] = [
                _Group(roles, [(-support[p], p) for p in sorted(positions, key=lambda p: (-support[p], p))])
                for (_, roles), positions in members.items()]
        return groups


class _ModelBaseline(WorldModelBase):
    """Prompt a model with the history (and a subclass's context); its reply is the observation.

    The prompt is fitted to the model's context window (`context_tokens` overrides what the backend
    says; a backend that says nothing gets only the character budgets): the oldest history and the
    least useful context go first, never the current action, and the audit's `prompt_fit` and notes
    say what was cut. A prompt that cannot fit is not sent: the prediction falls back, saying why.
    The log's system prompt and tool schemas (`episode_preamble`) are in every prompt from the first step: start
    on `prompts.prefix_before(episode, t)`, which keeps them when the prefix holds none of the turns that declare
    them; `prompt_fit` says at every step (window known or not) how much of them was carried.
    """

    def __init__(self, llm: LLM, *, evidence: Worldbook | Sequence[Evidence] | None = None, max_tokens: int = 256,
                 temperature: float = 0.0, history_chars: int = 6000, item_chars: int = 1500,
                 context_tokens: int | None = None) -> None:
        super().__init__()
        self.llm = llm
        self.fallback = NearestEvidence(evidence) if evidence is not None and _evidence_of(evidence) else None
        self.action_schema = evidence.action_schema if isinstance(evidence, Worldbook) else None
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.history_chars = history_chars
        self.item_chars = item_chars
        self.context_tokens = context_tokens
        self._budget: PromptBudget | None = None
        self._budget_read = False
        self.preamble = PromptPreamble()

    def start(self, prefix: Episode | str, initial_state: dict[str, Any] | None = None) -> None:
        super().start(prefix, initial_state)
        self.preamble = episode_preamble(prefix) if isinstance(prefix, Episode) else PromptPreamble()

    @property
    def budget(self) -> PromptBudget | None:
        """The prompt's token budget (read from the model once), None when its window is unknown."""
        if not self._budget_read:
            self._budget = prompt_budget(self.llm, reply_tokens=self.max_tokens, window=self.context_tokens)
            self._budget_read = True
        return self._budget

    def prompt_context(self, action: Action) -> tuple[PromptContext, list[dict[str, Any]]]:
        """Extra system-message items for this action, most useful first, and one retrieved item per
        context item when they are retrieved (for the audit)."""
        return PromptContext(), []

    def context(self, action: Action) -> tuple[str, list[dict[str, Any]]]:
        """Extra system-message text for this action (all of it), and the items it was built from."""
        section, retrieved = self.prompt_context(action)
        return section.render(), retrieved

    def fitted(self, action: Action) -> tuple[list[Message], list[dict[str, Any]], PromptFit]:
        """The conversation for `action` fitted to the budget, the retrieved items it shows, and what was cut."""
        section, retrieved = self.prompt_context(action)
        messages, fit = fit_simulator_messages(
            env=self.env_id, task=self.task, initial_observation=self.initial_observation, history=self.history,
            action=action_line(action), context=section, history_chars=self.history_chars,
            item_chars=self.item_chars, budget=self.budget, preamble=self.preamble,
        )
        if retrieved and len(retrieved) == len(section.items):
            retrieved = retrieved[: len(section.items) - fit.context_cut]
        return messages, retrieved, fit

    def messages(self, action: Action) -> tuple[list[Message], list[dict[str, Any]]]:
        """The conversation for `action` and the items retrieved for it."""
        messages, retrieved, _ = self.fitted(action)
        return messages, retrieved

    def _predict(self, action: Action) -> Prediction:
        messages, retrieved, fit = self.fitted(action)
        fit_json = fit.to_json()  # every step says what it carried: the system prompt and tools, the history
        if not fit.fits:
            prediction = self._fall_back(action, retrieved, fit.summary(), None, calls=0)
            prediction.audit.prompt_fit = fit_json
            return prediction
        try:
            [completion, *_] = self.llm.chat(messages, max_tokens=self.max_tokens, temperature=self.temperature)
        except LLMError as error:
            prediction = self._fall_back(action, retrieved, f"model call failed: {type(error).__name__}: {error}", None)
            prediction.audit.prompt_fit = fit_json
            return prediction
        cut = [fit.summary()] if fit.cut else []
        observation = parse_observation(completion.text)
        if not observation:
            prediction = self._fall_back(action, retrieved, "the model's reply holds no observation", completion)
            prediction.audit.notes[1:1] = cut
            prediction.audit.prompt_fit = fit_json
            return prediction
        audit = Audit(route="model", source="model", retrieved=retrieved, model_calls=1,
                      tokens=completion.total_tokens, prompt_fit=fit_json,
                      notes=cut + (["served from the response cache"] if completion.cached else []))
        if completion.finish_reason == "length":
            audit.notes.append(f"the reply was cut at max_tokens={self.max_tokens}")
        done = self.fallback is not None and self.fallback.ends(action.name, observation)
        return Prediction(observation=observation, outcome="unknown", done=done, audit=audit)

    def _fall_back(self, action: Action, retrieved: list[dict[str, Any]], reason: str,
                   completion: Completion | None, *, calls: int = 1) -> Prediction:
        tokens = completion.total_tokens if completion is not None else 0
        if self.fallback is not None:
            prediction = self.fallback.nearest(action, notes=[reason])
            prediction.audit.model_calls, prediction.audit.tokens = calls, tokens
            prediction.audit.retrieved = retrieved + prediction.audit.retrieved
            return prediction
        return Prediction(observation="", outcome="unknown", audit=Audit(
            route="model", retrieved=retrieved, model_calls=calls, tokens=tokens, notes=[reason, "no evidence to fall back on"]))


class DirectPrompting(_ModelBaseline):
    """History + action -> next observation, nothing else in the prompt."""

    name = "direct"


class Searcher(Protocol):
    """Anything retrieval can use: `search(query, k)` returning items with `.id` and `.text`."""

    def search(self, query: str, k: int = ...) -> Sequence[Any]:
        ...


class TraceRAG(_ModelBaseline):
    """Direct prompting plus the top-k recorded transitions for the action.

    `index_or_evidence` is a search index (a `WorldbookIndex`, asked for evidence only in `mode`,
    or any object with `search(query, k)`), a worldbook, or a list of evidence (searched with the
    lexical scorer of `NearestEvidence`).
    """

    name = "trace_rag"

    def __init__(self, llm: LLM, index_or_evidence: Searcher | Worldbook | Sequence[Evidence], *, k: int = 5,
                 mode: str = "lexical", evidence_chars: int = 3000, **options: Any) -> None:
        is_index = hasattr(index_or_evidence, "search") and not isinstance(index_or_evidence, Worldbook)
        evidence = options.pop("evidence", None if is_index else index_or_evidence)
        super().__init__(llm, evidence=evidence, **options)
        self.k, self.mode, self.evidence_chars = k, mode, evidence_chars
        self.index: Any = index_or_evidence if is_index else None
        self.scorer = None if is_index else EvidenceScorer(_evidence_of(index_or_evidence))  # type: ignore[arg-type]
        self._by_id = {e.turn_id: e for e in (_evidence_of(evidence) if evidence is not None else [])}

    def _search(self, query: str) -> list[tuple[str, str, float | None]]:
        """(id, prompt text, score) of the retrieved items."""
        if self.scorer is not None:
            return [(hit.id, hit.text, hit.score) for hit in self.scorer.search(query, self.k)]
        parameters = inspect.signature(self.index.search).parameters
        if "kinds" in parameters and "mode" in parameters:
            hits = self.index.search(query, self.k, kinds=["evidence"], mode=self.mode)
        else:
            hits = self.index.search(query, self.k)
        out = []
        for hit in hits:
            item_id = str(getattr(hit, "id", ""))
            known = self._by_id.get(item_id)
            text = f"> {known.action_text}\n{known.observation}" if known is not None else str(getattr(hit, "text", ""))
            score = getattr(hit, "score", None)
            out.append((item_id, text, float(score) if isinstance(score, (int, float)) else None))
        return out

    def prompt_context(self, action: Action) -> tuple[PromptContext, list[dict[str, Any]]]:
        hits = self._search(_query(action))
        blocks, retrieved, used = [], [], 0
        for item_id, text, score in hits:
            if used + len(text) > self.evidence_chars:
                break
            blocks.append(text)
            retrieved.append({"id": item_id, "score": None if score is None else round(score, 4)})
            used += len(text) + 2
        return PromptContext(template=RAG_SECTION.replace("{examples}", "{items}"), items=tuple(blocks),
                             unit="retrieved transitions"), retrieved


class WorldbookPrompting(_ModelBaseline):
    """Direct prompting plus the worldbook (schemas, rules, notes) rendered into the system message."""

    name = "worldbook_prompting"

    def __init__(self, llm: LLM, book: Worldbook, *, book_chars: int = 8000, **options: Any) -> None:
        options.setdefault("evidence", book)
        super().__init__(llm, **options)
        self.book = book
        self.action_schema = book.action_schema
        self.rendered = render_worldbook(book, max_chars=book_chars)

    def prompt_context(self, action: Action) -> tuple[PromptContext, list[dict[str, Any]]]:
        lines = tuple(self.rendered.splitlines())
        return PromptContext(template=BOOK_SECTION.replace("{book}", "{items}"), items=lines, joiner="\n",
                             unit="worldbook lines", left_out="({count} more lines left out)"), []
