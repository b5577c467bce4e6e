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
    every run.
    """

    def __init__(self, evidence: Sequence[Evidence], *, with_observation: bool = False) -> None:
        self.evidence = list(evidence)
        self._docs: list[Counter[str]] = []
        for item in self.evidence:
            text = item.action_text + (" " + item.observation if with_observation else "")
            self._docs.append(Counter(tokens(f"{item.action} {text}")))
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        total = max(len(self._docs), 1)
        self._idf = {token: math.log(1.0 + total / count) for token, count in frequency.items()}

    def actions(self) -> set[str]:
        return {item.action for item in self.evidence}

    def search(self, query: str, k: int | None = 5, *, action: str | None = None) -> list[ScoredEvidence]:
        """The `k` items nearest `query` (all when None; only those of `action` when given)."""
        wanted = Counter(tokens(query))
        scored = []
        for position, (item, doc) in enumerate(zip(self.evidence, self._docs, strict=True)):
            if action is not None and item.action != action:
                continue
            overlap = sum(min(count, doc[token]) * self._idf.get(token, 0.0) for token, count in wanted.items())
            extra = sum(count for token, count in doc.items() if token not in wanted)
            scored.append((position, ScoredEvidence(item, overlap, extra)))
        scored.sort(key=lambda entry: (-entry[1].score, entry[1].extra, entry[0]))
        return [hit for _, hit in (scored if k is None else scored[:k])]
