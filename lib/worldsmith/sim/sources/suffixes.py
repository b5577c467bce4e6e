"""Trailing lines an answer carries only sometimes, and the condition that decides them.

TextWorld answers `take banana from counter` with "You take the banana from the counter." and, when
the banana is in the recipe the cookbook showed, a blank line and "Your score has just gone up by one
point."; the knife, taken the same way, earns nothing. A rule or a recalled answer that copies one of
these gets the other wrong. So an answer's last block (the text after its last blank line) is learned
apart from its body, per action, with the condition the evidence supports:

- a *suffix* is a last block (no digits: it is rendered verbatim) that ends at least `MIN_SUPPORT`
  answers of at least two actions;
- for one action and suffix, the *labelled* turns are those whose body (the answer without the
  suffix, its arguments as slots) some turn showed with the suffix: the suffix's presence there is
  what a condition must predict;
- the candidate conditions: the action's first argument is named by the latest answer to another
  action line of the episode (`examine cookbook`), optionally only the first time the action line
  gets the suffix in the episode. One is kept when it is right on at least `MIN_ACCURACY` of the
  labelled turns, on at least `MIN_SUPPORT` with the suffix, and beats both constants (always,
  never): a suffix that always or never comes with its body needs no condition.

Like every tracker it only proposes: `adjust` gives the answer with the suffix added or removed, the
route table measures that held out against the answer left alone (`suffix`), and the harness
adjusts only where that record is not worse.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.sim.sources.base import AnswerSource, CandidateAnswer, SourceContext, Step
from worldsmith.sim.sources.inventory import names, phrases
from worldsmith.sim.sources.registry import answer_source
from worldsmith.worldbook.model import Evidence
from worldsmith.worldbook.templates import make_template

__all__ = ["MIN_ACCURACY", "MIN_SUPPORT", "SuffixConditions", "SuffixRule", "SuffixSource", "split_suffix"]

MIN_SUPPORT = 3
MIN_ACCURACY = 0.9
MAX_SUFFIX = 200  # a longer last block is content, not a trailing line
_BREAK = re.compile(r"\n[ \t]*\n\s*")


@dataclass(frozen=True)
class SuffixRule:
    """When `action`'s answer ends with `suffix`: its first argument named by `reference`'s latest answer."""

    action: str
    suffix: str
    separator: str
    reference: str
    once: bool  # only the first time the action line gets the suffix in an episode
    bodies: frozenset[str]  # the body templates the suffix comes with
    labelled: int
    correct: int

    def describe(self) -> str:
        once = ", the first time" if self.once else ""
        return f"{self.suffix!r} when the thing is named by the latest answer to {self.reference!r}{once}"


def split_suffix(observation: str) -> tuple[str, str, str]:
    """(body, separator, last block); a text without a blank line is all body."""
    text = observation.rstrip()
    breaks = list(_BREAK.finditer(text))
    if not breaks:
        return observation, "", ""
    last = breaks[-1]
    return text[:last.start()], last.group(0), text[last.end():]


def _first_phrase(arguments: Any) -> str | None:
    named = phrases(arguments if isinstance(arguments, Mapping) else {})
    return next(iter(named.values()), None)


def _line(text: str) -> str:
    return " ".join(text.split()).lower()


@dataclass(frozen=True, slots=True)
class _Row:
    body: str  # template
    has: bool
    named_by: frozenset[str]  # action lines whose latest answer names the first argument
    repeated: bool  # the action line got the suffix earlier in the episode


class SuffixConditions:
    """Learned suffix rules per action; per episode, the latest answer of every action line."""

    def __init__(self, evidence: Sequence[Evidence]) -> None:
        self.rules: dict[str, list[SuffixRule]] = {}
        self._learn(evidence)
        self.reset()

    def reset(self) -> None:
        self.latest: dict[str, str] = {}  # action line -> its latest answer, lower case
        self.given: set[tuple[str, str]] = set()  # (action line, suffix) answered with it this episode

    def _candidates(self, evidence: Sequence[Evidence]) -> dict[str, tuple[str, set[str]]]:
        """suffix -> (its most common separator, the actions it ends)."""
        seen: dict[str, set[str]] = defaultdict(set)
        counts: Counter[str] = Counter()
        separators: dict[str, Counter[str]] = defaultdict(Counter)
        for item in evidence:
            _, separator, last = split_suffix(item.observation)
            if last and len(last) <= MAX_SUFFIX and not any(c.isdigit() for c in last):
                seen[last].add(item.action)
                counts[last] += 1
                separators[last][separator] += 1
        return {last: (separators[last].most_common(1)[0][0], actions) for last, actions in seen.items()
                if counts[last] >= MIN_SUPPORT and len(actions) >= 2}

    def _learn(self, evidence: Sequence[Evidence]) -> None:
        from worldsmith.worldbook.induce import group_by_episode

        candidates = self._candidates(evidence)
        if not candidates:
            return
        rows: dict[tuple[str, str], Counter[_Row]] = defaultdict(Counter)  # alike rows counted, not repeated
        templates: dict[str, str] = {}  # one copy of each template text: rows are items x candidate suffixes
        for items in group_by_episode(evidence).values():
            latest: dict[str, str] = {}
            given: set[tuple[str, str]] = set()
            for item in items:
                line = _line(item.action_text)
                phrase = _first_phrase(item.arguments)
                suffixes = [suffix for suffix, (_, actions) in candidates.items() if item.action in actions] \
                    if phrase is not None else []
                if suffixes:
                    assert phrase is not None
                    body, _, last = split_suffix(item.observation)
                    arguments = item.arguments if isinstance(item.arguments, dict) else {}
                    named_by = frozenset(ref for ref, text in latest.items() if ref != line and names(phrase, text))
                    shapes: dict[bool, str] = {}  # has the suffix -> the template of the body, else the whole
                    for suffix in suffixes:
                        has = last == suffix
                        if has not in shapes:
                            text = make_template(arguments, body if has else item.observation)
                            shapes[has] = templates.setdefault(text, text)
                        rows[(item.action, suffix)][_Row(shapes[has], has, named_by, (line, suffix) in given)] += 1
                        if has:
                            given.add((line, suffix))
                latest[line] = item.observation.lower()
        for (action, suffix), found in rows.items():
            rule = _best_rule(action, suffix, candidates[suffix][0], found)
            if rule is not None:
                self.rules.setdefault(action, []).append(rule)

    # ------------------------------------------------------------------ an episode
    def observe(self, action_text: str, observation: str) -> None:
        line = _line(action_text)
        _, _, last = split_suffix(observation)
        if last:
            self.given.add((line, last))
        self.latest[line] = observation.lower()

    def snapshot(self) -> dict[str, list[str]]:
        """The learned conditions, per action: what the Simulate page and the audit show."""
        return {action: [rule.describe() for rule in rules] for action, rules in sorted(self.rules.items())}

    def applies(self, action: str) -> bool:
        return action in self.rules

    def adjust(self, action: str, arguments: Mapping[str, Any], action_text: str,
               observation: str) -> tuple[str, str] | None:
        """(the answer with the learned suffix added or removed, why), or None when it stands as it is."""
        phrase = _first_phrase(arguments)
        if phrase is None:
            return None
        line = _line(action_text)
        for rule in self.rules.get(action, []):
            body, _, last = split_suffix(observation)
            has = last == rule.suffix
            if not has:
                body = observation
            if make_template(dict(arguments), body) not in rule.bodies:
                continue
            named = rule.reference != line and names(phrase, self.latest.get(rule.reference, ""))
            want = named and not (rule.once and (line, rule.suffix) in self.given)
            if want == has:
                return None
            if want:
                return body + rule.separator + rule.suffix, f"added {rule.describe()}"
            return body, f"removed {rule.describe()}: it does not hold"
        return None


def _best_rule(action: str, suffix: str, separator: str, rows: Counter[_Row]) -> SuffixRule | None:
    """`rows`: each distinct row with the number of turns that gave it."""
    bodies = frozenset(row.body for row in rows if row.has)
    labelled = [(row, count) for row, count in rows.items() if row.body in bodies]
    total = sum(count for _, count in labelled)
    positives = sum(count for row, count in labelled if row.has)
    if positives < MIN_SUPPORT or positives == total:
        return None
    constant = max(positives, total - positives)
    best: tuple[int, bool, str] | None = None
    for reference in sorted({ref for row, _ in labelled for ref in row.named_by}):
        for once in (False, True):
            correct = sum(count for row, count in labelled
                          if (reference in row.named_by and not (once and row.repeated)) == row.has)
            if best is None or correct > best[0]:
                best = (correct, once, reference)
    if best is None:
        return None
    correct, once, reference = best
    if correct <= constant or correct < MIN_ACCURACY * total:
        return None
    return SuffixRule(action=action, suffix=suffix, separator=separator, reference=reference, once=once,
                      bodies=bodies, labelled=total, correct=correct)


class SuffixSource:
    """The `suffixes` source: it answers nothing itself; the harness adjusts the trailing line of the answer it
    gives where the route table's `suffix` row says so (`SuffixConditions.adjust`)."""

    def __init__(self, context: SourceContext) -> None:
        self.tracker = SuffixConditions(context.evidence)

    def reset(self, opening: str) -> None:
        self.tracker.reset()

    def observe(self, step: Step, observation: str) -> None:
        self.tracker.observe(step.line, observation)

    def propose(self, step: Step) -> list[CandidateAnswer]:
        return []

    def snapshot(self) -> dict[str, Any]:
        return self.tracker.snapshot()


@answer_source("suffixes", snapshot_key="trailing lines")
def _suffixes(context: SourceContext) -> AnswerSource:
    """Trailing lines an answer carries only sometimes."""
    return SuffixSource(context)
