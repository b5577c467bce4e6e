"""Leakage control and the seen/unseen split: what the worldbook was built from, against what is evaluated.

A worldbook's evidence cites its turns as `<episode_id>#<turn>`, so a book alone tells which
episodes and turns it saw. An evaluation refuses to run (`LeakageError`) when an evaluated episode
or target turn is in the evidence, or when an evaluated trajectory is in it verbatim under another
id (same actions, same observations: `worldbook.build.duplicate_trajectories`, which the builder's
`leakage_check` runs too, so `build` and `eval` flag the same copies); with the construction
episodes at hand it also runs the builder's check. `leaked_episodes` says why each leaked episode
leaks, so a run can drop them instead (`EvalConfig.drop_leaked`). Sharing a trajectory *family*
(another trial of the same game) is not leakage: those records are reported as "seen" tasks, the
others as "unseen". Whether a book's evidence holds the evaluated episodes is a question about the book, so it is
answered here, below the simulator's side-by-side view and the evaluation that both ask it. Both checks return
one type, `LeakageReport` (`worldbook.leakage_report`: its JSON, versions and the reader of older stored shapes).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from worldsmith.traces.model import Episode, split_turn_id
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.build import duplicate_trajectories, leakage_check, trajectory_family
from worldsmith.worldbook.leakage_report import (
    BUILDER_REASON,
    EXAMPLES,
    LeakageReport,
    leak_reasons,
    reasons_by_episode,
)
from worldsmith.worldbook.model import Worldbook

__all__ = ["LeakageError", "LeakageReport", "book_episode_ids", "check_leakage", "evidence_families"]


class LeakageError(BadInputError):
    """Evaluation targets are in the worldbook's construction data: the numbers would be dishonest."""

    def __init__(self, message: str, report: LeakageReport) -> None:
        super().__init__(message)
        self.report = report


def book_episode_ids(book: Worldbook) -> set[str]:
    """The ids of the episodes the book's evidence comes from."""
    out = set()
    for item in book.evidence:
        try:
            out.add(split_turn_id(item.turn_id)[0])
        except ValueError:
            continue
    return out


def _evidence_transitions(book: Worldbook) -> dict[str, tuple[tuple[str, str], ...]]:
    """The book's evidence as trajectories: per episode, its (action text, observation) pairs in turn order."""
    turns: dict[str, list[tuple[int, str, str]]] = {}
    for item in book.evidence:
        try:
            episode_id, index = split_turn_id(item.turn_id)
        except ValueError:
            continue
        turns.setdefault(episode_id, []).append((index, item.action_text, item.observation))
    return {episode_id: tuple((a, o) for _, a, o in sorted(rows)) for episode_id, rows in turns.items()}


def evidence_families(book: Worldbook, candidates: Iterable[Episode]) -> tuple[set[str], list[str]]:
    """Families of the book's evidence episodes found among `candidates`, and the evidence episode ids not found."""
    wanted = book_episode_ids(book)
    families: set[str] = set()
    found: set[str] = set()
    for episode in candidates:
        if episode.id in wanted and episode.id not in found:
            found.add(episode.id)
            families.add(trajectory_family(episode))
    return families, sorted(wanted - found)


def check_leakage(book: Worldbook, evaluation: Sequence[Episode], *, construction: Sequence[Episode] | None = None,
                  raise_on_leak: bool = True) -> LeakageReport:
    """Whether `evaluation` is disjoint from what `book` was built from; raises `LeakageError` when it is not.

    The report (`against="evidence"`): shared episode ids, leaked target turn ids, evaluated trajectories found
    verbatim in the evidence (whole, or a truncated copy of an evidence trajectory:
    `worldbook.build.duplicate_trajectories`, which the builder's check uses too), how many target observations
    occur verbatim in the evidence (informative only: short answers such as "Nothing happens." recur
    legitimately), the builder's check when `construction` is given, and `leaked_episodes`: why each leaked
    evaluated episode leaks.
    """
    transitions = _evidence_transitions(book)
    evidence_episodes = set(transitions)  # the same ids as book_episode_ids, from one walk of the evidence
    evidence_turns = {item.turn_id for item in book.evidence}
    shared = sorted(e.id for e in evaluation if e.id in evidence_episodes)
    targets = [(e.id, t.id or f"{e.id}#{t.index}") for e in evaluation for t in e.turns]
    leaked = [(episode_id, turn) for episode_id, turn in targets if turn in evidence_turns]
    duplicated = duplicate_trajectories(evaluation, transitions)
    observed = {item.observation for item in book.evidence}
    found = leak_reasons("evidence", shared, leaked, duplicated)
    builder = leakage_check(construction, evaluation) if construction is not None else None
    if builder is not None:
        found += [(e, BUILDER_REASON) for e in builder.leaked_episodes]
    report = LeakageReport(
        against="evidence", leaked_episodes=reasons_by_episode(found), shared_episodes=shared[:EXAMPLES],
        leaked_turns=[turn for _, turn in leaked][:EXAMPLES],
        duplicated_trajectories=[f"{a} = {b}" for a, b in sorted(duplicated.items())][:EXAMPLES],
        target_turns=len(targets), evaluation_episodes=len(evaluation), evidence_episodes=len(evidence_episodes),
        targets_seen_verbatim_in_evidence=sum(t.observation.text in observed for e in evaluation for t in e.turns),
        builder_check=builder)
    if not report.ok and raise_on_leak:
        raise LeakageError(f"leakage: refusing to evaluate {book.name!r} on these episodes: " + _reasons(report),
                           report)
    return report


def _reasons(report: LeakageReport) -> str:
    reasons = []
    if report.shared_episodes:
        reasons.append(f"evaluated episodes are in the book's evidence (e.g. {report.shared_episodes[0]})")
    if report.leaked_turns:
        reasons.append(f"target turns are in the book's evidence (e.g. {report.leaked_turns[0]})")
    if report.duplicated_trajectories:
        reasons.append(f"evaluated trajectories are in the evidence under another id "
                       f"(e.g. {report.duplicated_trajectories[0]})")
    if report.builder_check is not None and not report.builder_check.ok:
        reasons.append("the construction episodes share episodes, target turns or trajectories with the evaluation "
                       "set")
    return f"{len(report.leaked_episodes)} episodes leak: " + "; ".join(reasons)
