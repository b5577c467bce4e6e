"""Recorded trajectories that share this episode's past answer as they did then: the `aligned` source.

Episodes of one game or one backing store (an ALFWorld trial, BFCL's categories over the same
initial state, a service API's shared records) show the same observations for the same actions:
once the current episode has shown (action, observation) pairs that a recorded trajectory also has,
that trajectory's answer to the pending action, after the calls most like the current ones, is a
proposal (`aligned_evidence`): recall of a shared initial state without modelling it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from worldsmith.sim.sources.base import Answer, AnswerSource, CandidateAnswer, SourceContext, Step, line_key
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence

__all__ = ["RARE_PAIR_SHARE", "AlignedEvidence", "AlignedSource"]

RARE_PAIR_SHARE = 0.05  # an (action, observation) pair in more of the recorded trajectories than this is common


class AlignedEvidence:
    """Recorded trajectories that share this episode's (action, observation) pairs answer as they did then.

    Episodes of one game or one backing store (an ALFWorld trial, BFCL's categories over the same
    initial state, a service API's shared records) show the same observations for the same actions.
    Once the current episode has shown pairs that a recorded trajectory also has, that trajectory's
    answer to the pending action, after the calls most like the current ones, is a proposal.
    """

    def __init__(self, evidence: Sequence[Evidence] = ()) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        self.trajectories: list[list[tuple[str, str]]] = [
            [(line_key(item.action_text), item.observation) for item in items]
            for items in group_by_episode(evidence).values()]
        self.by_pair: dict[tuple[str, str], set[int]] = defaultdict(set)
        self.positions: list[dict[str, list[int]]] = []  # per trajectory: action line -> its turn positions
        for index, turns in enumerate(self.trajectories):
            positions: dict[str, list[int]] = defaultdict(list)
            for position, pair in enumerate(turns):
                self.by_pair[pair].add(index)
                positions[pair[0]].append(position)
            self.positions.append(dict(positions))
        self.max_holders = max(2, int(RARE_PAIR_SHARE * len(self.trajectories)))
        self.reset()

    def reset(self) -> None:
        self.shared: Counter[int] = Counter()
        self.lines: list[str] = []

    def observe(self, action_text: str, observation: str) -> None:
        line = line_key(action_text)
        holders = self.by_pair.get((line, observation), ())
        if len(holders) <= self.max_holders:  # a pair most trajectories show ("You are carrying nothing.") tells
            for index in holders:  # nothing about which of them this episode is like
                self.shared[index] += 1
        self.lines.append(line)

    def _answer(self, index: int, line: str) -> tuple[int, str] | None:
        """(how many calls before it match the current ones, the answer) of the trajectory's best turn for `line`."""
        best: tuple[int, str] | None = None
        turns = self.trajectories[index]
        for position in self.positions[index].get(line, ()):
            observation = turns[position][1]
            suffix = 0
            while suffix < min(position, len(self.lines)) and \
                    turns[position - 1 - suffix][0] == self.lines[len(self.lines) - 1 - suffix]:
                suffix += 1
            if best is None or suffix > best[0]:
                best = (suffix, observation)
        return best

    def propose(self, action_text: str) -> list[CandidateAnswer]:
        if not self.shared:
            return []
        line = line_key(action_text)
        top = max(self.shared.values())
        candidates = []
        for index, count in self.shared.items():
            if count == top:
                found = self._answer(index, line)
                if found is not None:
                    candidates.append((found[0], found[1]))
        if not candidates:
            return []
        best_suffix = max(suffix for suffix, _ in candidates)
        answers = {o for s, o in candidates if s == best_suffix}
        if len(answers) > 1:  # equally aligned trajectories disagree: the answer depends on what they do not share
            return []
        answer = answers.pop()
        return [CandidateAnswer("aligned_evidence", answer, notes=[
            f"{len(candidates)} recorded trajectories share {top} of this episode's observations; "
            f"after the same {best_suffix} calls they answered so"])]


class AlignedSource:
    """The `aligned` source: `AlignedEvidence` over the book's trajectories (answers while state is tracked)."""

    def __init__(self, context: SourceContext) -> None:
        self.tracker = AlignedEvidence(context.evidence)
        self.gate = context.tracking

    def reset(self, opening: str) -> None:
        self.tracker.reset()

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.line, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return self.tracker.propose(step.line) if self.gate else []

    def snapshot(self) -> dict[str, Any]:
        return {}


@answer_source("aligned", answers=(Answer("aligned_evidence", route="evidence:aligned", rank=140, per_action=True),))
def _aligned(context: SourceContext) -> AnswerSource:
    """Recorded trajectories that share this episode's past."""
    return AlignedSource(context)
