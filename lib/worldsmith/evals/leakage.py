"""Leakage control and the seen/unseen split: what the worldbook was built from, against what is evaluated.

A worldbook's evidence cites its turns as `<episode_id>#<turn>`, so a book alone tells which
episodes and turns it saw. An evaluation refuses to run (`LeakageError`) when an evaluated episode
or target turn is in the evidence, or when an evaluated trajectory is in it verbatim under another
id (same actions, same observations); with the construction episodes at hand it also runs the
builder's own `leakage_check`. Sharing a trajectory *family* (another trial of the same game) is
not leakage: those records are reported as "seen" tasks, the others as "unseen".
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from worldsmith.traces.model import Episode, split_turn_id
from worldsmith.worldbook.build import leakage_check, trajectory_family
from worldsmith.worldbook.model import Worldbook

__all__ = ["LeakageError", "book_episode_ids", "check_leakage", "evidence_families"]


class LeakageError(ValueError):
    """Evaluation targets are in the worldbook's construction data: the numbers would be dishonest."""

    def __init__(self, message: str, report: dict[str, Any]) -> None:
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


def _signature(pairs: Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    return tuple(pairs)


def _evidence_trajectories(book: Worldbook) -> dict[tuple[tuple[str, str], ...], str]:
    turns: dict[str, list[tuple[int, str, str]]] = {}
    for item in book.evidence:
        try:
            episode_id, index = split_turn_id(item.turn_id)
        except ValueError:
            continue
        turns.setdefault(episode_id, []).append((index, item.action_text, item.observation))
    return {_signature((a, o) for _, a, o in sorted(rows)): episode_id for episode_id, rows in turns.items()}


def _episode_signature(episode: Episode) -> tuple[tuple[str, str], ...]:
    return _signature((t.action.raw if t.action.raw is not None else t.action.name, t.observation.text)
                      for t in episode.turns)


def _duplicates(book: Worldbook, evaluation: Sequence[Episode]) -> list[str]:
    """Evaluated trajectories that are an evidence trajectory, or a truncated copy of one, under another id."""
    by_first: dict[tuple[str, str], list[tuple[tuple[tuple[str, str], ...], str]]] = {}
    for signature, episode_id in _evidence_trajectories(book).items():
        if signature:
            by_first.setdefault(signature[0], []).append((signature, episode_id))
    out = []
    for episode in evaluation:
        signature = _episode_signature(episode)
        if not signature:
            continue
        for candidate, episode_id in by_first.get(signature[0], []):
            if episode_id == episode.id:
                continue
            same = candidate == signature if len(signature) == 1 else candidate[: len(signature)] == signature
            if same:
                out.append(f"{episode.id} = {episode_id}" + ("" if len(candidate) == len(signature) else
                                                            f" (its first {len(signature)} turns)"))
                break
    return sorted(out)


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
                  raise_on_leak: bool = True) -> dict[str, Any]:
    """Whether `evaluation` is disjoint from what `book` was built from; raises `LeakageError` when it is not.

    The report: shared episode ids, leaked target turn ids, evaluated trajectories found verbatim in
    the evidence (whole, or a truncated copy of an evidence trajectory), how many target observations occur verbatim in the evidence (informative only: short
    answers such as "Nothing happens." recur legitimately), and the builder's check when
    `construction` is given.
    """
    evidence_episodes = book_episode_ids(book)
    evidence_turns = {item.turn_id for item in book.evidence}
    shared = sorted(e.id for e in evaluation if e.id in evidence_episodes)
    targets = [t.id or f"{e.id}#{t.index}" for e in evaluation for t in e.turns]
    leaked = [t for t in targets if t in evidence_turns]
    duplicated = _duplicates(book, evaluation)
    observed = {item.observation for item in book.evidence}
    report: dict[str, Any] = {
        "shared_episodes": shared[:20], "leaked_turns": leaked[:20], "duplicated_trajectories": duplicated[:20],
        "target_turns": len(targets), "evaluation_episodes": len(evaluation),
        "evidence_episodes": len(evidence_episodes),
        "targets_seen_verbatim_in_evidence": sum(t.observation.text in observed for e in evaluation for t in e.turns),
    }
    ok = not shared and not leaked and not duplicated
    if construction is not None:
        builder = leakage_check(construction, evaluation)
        report["builder_check"] = builder
        ok = ok and bool(builder["ok"])
    report["ok"] = ok
    if not ok and raise_on_leak:
        reasons = []
        if shared:
            reasons.append(f"{len(shared)} evaluated episodes are in the book's evidence (e.g. {shared[0]})")
        if leaked:
            reasons.append(f"{len(leaked)} target turns are in the book's evidence (e.g. {leaked[0]})")
        if duplicated:
            reasons.append(f"{len(duplicated)} evaluated trajectories are in the evidence under another id "
                           f"(e.g. {duplicated[0]})")
        if construction is not None and not report["builder_check"]["ok"]:
            reasons.append("the construction episodes share episodes or target turns with the evaluation set")
        raise LeakageError(f"leakage: refusing to evaluate {book.name!r} on these episodes: " + "; ".join(reasons),
                           report)
    return report
