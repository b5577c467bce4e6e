"""Lexical look-up over evidence transitions, with no index files and no model.

The nearest-evidence baseline and trace RAG's fallback both need "the recorded transitions most
like this action". A token-overlap score weighted by inverse document frequency (rare words such
as object names count more than `to` or `1`) is enough for action texts of a few words, is
deterministic, and needs no package beyond the standard library.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.traces.model import Action
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.templates import text_arguments

__all__ = ["EvidenceScorer", "ScoredEvidence", "action_arguments", "tokens"]

_TOKEN = re.compile(r"[a-z0-9]+")


def tokens(text: str) -> list[str]:
    """Lower-case words and numbers: what the overlap score compares."""
    return _TOKEN.findall(text.lower())


def action_arguments(action: Action) -> dict[str, Any]:
    """Named arguments as the evidence stores them: a text command's remainder is split into roles."""
    arguments = action.arguments
    if isinstance(arguments, dict):
        if set(arguments) == {"text"} and isinstance(arguments["text"], str):
            return text_arguments(arguments["text"])
        return arguments
    return {}


@dataclass(frozen=True)
class ScoredEvidence:
    """One evidence item and how close it is to the query (higher `score` is nearer)."""

    evidence: Evidence
    score: float  # summed weight of the query's words the item shares
    extra: int = 0  # the item's words the query does not have (fewer is nearer)

    @property
    def id(self) -> str:
        return self.evidence.turn_id

    @property
    def text(self) -> str:
        return f"> {self.evidence.action_text}\n{self.evidence.observation}"

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "action": self.evidence.action, "action_text": self.evidence.action_text,
                "score": round(self.score, 4)}


class EvidenceScorer:
    """IDF-weighted token overlap between a query and each evidence item's action text.

    `search(query, k, action=...)` keeps to one action name when asked. Equal overlaps go to the
    item with fewer words the query lacks, then to the earlier item, so results are the same on
    every run. The items are indexed by action name, so a search for one action reads only its items
    (the harness asks one per turn: a scan of all evidence each time made replay quadratic).
    """

    def __init__(self, evidence: Sequence[Evidence], *, with_observation: bool = False) -> None:
        self.evidence = list(evidence)
        self._docs: list[Counter[str]] = []
        for item in self.evidence:
            text = item.action_text + (" " + item.observation if with_observation else "")
            self._docs.append(Counter(tokens(f"{item.action} {text}")))
        self._sizes = [sum(doc.values()) for doc in self._docs]  # each item's word count: `extra` by subtraction
        self._by_action: dict[str, list[int]] = {}
        for position, item in enumerate(self.evidence):
            self._by_action.setdefault(item.action, []).append(position)
        self._actions = frozenset(self._by_action)
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        total = max(len(self._docs), 1)
        self._idf = {token: math.log(1.0 + total / count) for token, count in frequency.items()}

    def actions(self) -> frozenset[str]:
        return self._actions

    def terms(self, query: str) -> list[tuple[str, int, float]]:
        """The query's words as `rank` weighs them: (word, count, weight), in the query's word order."""
        return [(token, count, self._idf.get(token, 0.0)) for token, count in Counter(tokens(query)).items()]

    def positions(self, action: str) -> list[int]:
        """The positions of `action`'s items, in evidence order."""
        return self._by_action.get(action, [])

    def size(self, position: int) -> int:
        """The word count of the item at `position`."""
        return self._sizes[position]

    def words(self, position: int) -> Counter[str]:
        """The words of the item at `position` (the scorer's own counter: read it, do not edit it)."""
        return self._docs[position]

    def overlaps(self, terms: Sequence[tuple[str, int, float]], positions: Sequence[int]) -> list[tuple[float, int]]:
        """(score, extra) of each of these items for `terms` (`terms(query)`), the one scoring `rank` and `search` use:
        items with equal words score equally, so a caller may score one item for all of them."""
        docs, sizes = self._docs, self._sizes
        out = []
        for position in positions:
            doc = docs[position]
            overlap = 0.0
            shared = 0
            for token, count, weight in terms:
                have = doc.get(token)
                if have:
                    overlap += min(count, have) * weight
                    shared += have
            out.append((overlap, sizes[position] - shared))
        return out

    def rank(self, query: str, action: str | None = None) -> list[tuple[int, float, int]]:
        """(position, score, extra) of every item (of `action` when given), unsorted: what `search` ranks, for a
        caller with its own order that needs only the first few items built."""
        positions = range(len(self.evidence)) if action is None else self.positions(action)
        scores = self.overlaps(self.terms(query), positions)
        return [(position, score, extra) for position, (score, extra) in zip(positions, scores, strict=True)]

    def search(self, query: str, k: int | None = 5, *, action: str | None = None) -> list[ScoredEvidence]:
        """The `k` items nearest `query` (all when None; only those of `action` when given)."""
        ranked = sorted(self.rank(query, action), key=lambda entry: (-entry[1], entry[2], entry[0]))
        return [ScoredEvidence(self.evidence[position], score, extra)
                for position, score, extra in (ranked if k is None else ranked[:k])]
