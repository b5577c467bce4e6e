"""The inputs of an evaluation run: its books, the episodes each is evaluated on, leakage and seen families.

A run has one part (a stored or given book on the selected episodes) or, cross-fitted, one per fold
(a book built from the other folds, on the fold's episodes). Leakage is checked here, before anything
runs: leaked evaluation targets stop the run, or with `drop_leaked` are left out and named.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import orjson

from worldsmith.evals.config import EvalConfig
from worldsmith.evals.envmatch import env_matches, match_episodes
from worldsmith.evals.novelty import NoveltyIndex
from worldsmith.sim.route_learning import build_simulator_book
from worldsmith.traces.dialogue import exclude_dialogue_only
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError
from worldsmith.util.progress import Progress
from worldsmith.workspace import Workspace
from worldsmith.worldbook.build import family_folds, trajectory_family
from worldsmith.worldbook.leakage import LeakageError, check_leakage, evidence_families
from worldsmith.worldbook.leakage_report import Dropped, LeakageReport
from worldsmith.worldbook.model import Worldbook

__all__ = ["Inputs", "Part", "digest", "fold_summary", "in_env", "leak_free", "load_inputs"]


def digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()


def in_env(episodes: Iterable[Episode], env: str | None) -> list[Episode]:
    """The episodes of environment `env` (all when empty): the same id, family or prefix (`envmatch.env_matches`)."""
    return [e for e in episodes if env_matches(e.env_id, env)]


def _select(episodes: Sequence[Episode], config: EvalConfig) -> list[Episode]:
    chosen = in_env((e for e in episodes if e.turns), config.env)
    if config.episodes is not None:
        wanted = set(config.episodes)
        missing = wanted - {e.id for e in chosen}
        if missing:
            raise BadInputError(f"episodes not in the evaluation set: {', '.join(sorted(missing)[:5])}")
        chosen = [e for e in chosen if e.id in wanted]
    chosen.sort(key=lambda e: e.id)
    repeated = sorted({a.id for a, b in zip(chosen, chosen[1:], strict=False) if a.id == b.id})
    if repeated:
        raise BadInputError(f"episode ids repeat in the evaluation set: {', '.join(repeated[:5])}")
    if config.max_episodes is not None:
        chosen = chosen[: config.max_episodes]
    if not chosen:
        raise BadInputError(f"no episodes with turns to evaluate in dataset {config.dataset!r}"
                         + (f" split {config.split!r}" if config.split else "")
                         + (f" environment {config.env!r}" if config.env else ""))
    return chosen


@dataclass
class Part:
    """One book and the episodes it is evaluated on: the whole run, or one fold of a cross-fitted run."""

    book: Worldbook
    version: str
    episodes: list[Episode]
    families: set[str]  # trajectory families of the book's evidence: their records are "seen" tasks
    leakage: LeakageReport
    fold: int | None = None  # 1-based
    construction: int | None = None  # episodes the fold's book was built from

    @cached_property
    def novelty(self) -> NoveltyIndex:
        return NoveltyIndex.for_book(self.book)

    def prefix(self, folds: int) -> str:
        return f"fold {self.fold}/{folds}: " if self.fold else ""


def _pool(config: EvalConfig, ws: Workspace, episodes: Sequence[Episode] | None) -> tuple[list[Episode], Any, Any]:
    """The episodes the evaluation set is drawn from, their revision, and their dataset (None when given)."""
    if episodes is not None:
        pool = list(episodes)
        return pool, "inline-" + digest([(e.id, e.content_hash()) for e in pool])[:12], None
    dataset = ws.dataset(config.dataset)
    return list(dataset.iter_episodes(config.split)), dataset.revision, dataset


def _families(book: Worldbook, candidates: Iterable[Episode], leakage: LeakageReport) -> set[str]:
    families, unresolved = evidence_families(book, candidates)
    leakage.evidence_families, leakage.evidence_episodes_unresolved = len(families), len(unresolved)
    return families


def leak_free(book: Worldbook, episodes: list[Episode], construction: Sequence[Episode] | None,
               drop: bool) -> tuple[list[Episode], LeakageReport]:
    """The episodes, leakage checked: refused (`LeakageError`), or with `drop` the leaked ones left out, the report
    then describing the episodes kept and naming the dropped ones and why (`dropped`)."""
    leakage = check_leakage(book, episodes, construction=construction, raise_on_leak=not drop)
    if leakage.ok:
        return episodes, leakage
    kept = [e for e in episodes if e.id not in leakage.leaked_episodes]
    dropped = Dropped(count=len(episodes) - len(kept), episodes=leakage.leaked_episodes)
    rest = check_leakage(book, kept, construction=construction) if kept else leakage
    return kept, rest.model_copy(update={"dropped": dropped})


def _book_part(config: EvalConfig, ws: Workspace, pool: list[Episode], dataset: Any, book: Worldbook | None,
               construction: Sequence[Episode] | None) -> Part:
    """The run's one book (stored, or given) on the selected episodes, leakage checked."""
    sources: list[dict[str, Any]] = []
    if book is None:
        from worldsmith.worldbook.store import WorldbookStore

        if config.book is None:  # EvalConfig refuses this unless cross-fitted, which has no stored book
            raise BadInputError("set book (--book NAME): a run without folds evaluates a stored book")
        store = WorldbookStore.of_workspace(ws)
        version = config.book_version or store.head(config.book)
        book = store.load(config.book, version)
        sources = store.info(config.book, version).sources
    else:
        version = config.book_version or "inline-" + digest(book.model_dump(mode="json"))[:12]
    try:
        selected = _select(pool, config)
    except ValueError:
        problem = match_episodes(book.model_copy(update={"env_id": config.env}), pool, config.dataset).mismatch() \
            if config.env else None
        if problem is None:
            raise
        raise BadInputError(problem) from None
    chosen, leakage = leak_free(book, selected, construction, config.drop_leaked)
    if construction is not None:
        candidates: Iterable[Episode] = construction
    else:  # streamed: only the ids and families of the evidence episodes are kept
        streams = [pool] if dataset is None else [dataset.iter_episodes()]
        for source in sources:
            name = source.get("dataset") if isinstance(source, dict) else None
            if name and name != config.dataset and name in ws.list_datasets():
                streams.append(ws.dataset(name).iter_episodes())
        candidates = itertools.chain.from_iterable(streams)
    return Part(book, version, chosen, _families(book, candidates, leakage), leakage)


def _fold_parts(config: EvalConfig, pool: list[Episode], cache_dir: Path, progress: Progress | None) -> list[Part]:
    """Cross-fitting: per fold, a book built from the other folds' episodes, on the fold's selected episodes."""
    base = in_env(pool, config.env)  # what `worldsmith build --folds` deals into folds
    chosen = _select(pool, config)
    assignment = family_folds(base, config.folds)
    total = len(chosen) * len(config.methods)
    parts = []
    for fold in range(config.folds):
        held = [e for e in chosen if assignment[trajectory_family(e)] == fold]
        if not held:
            continue
        kept = [e for e in base if assignment[trajectory_family(e)] != fold]
        book = build_simulator_book(kept, name=f"{config.book or config.dataset}-fold{fold + 1}", cache_dir=cache_dir).book
        evaluated, leakage = leak_free(book, held, kept, config.drop_leaked)
        parts.append(Part(book, digest(book.model_dump(mode="json"))[:12], evaluated,
                           _families(book, kept, leakage), leakage, fold=fold + 1, construction=len(kept)))
        if progress is not None:
            dropped = f" ({len(held) - len(evaluated)} leaked, dropped)" if len(evaluated) < len(held) else ""
            progress(0, total, f"fold {fold + 1}/{config.folds}: book built from {len(kept)} episodes, "
                               f"{len(evaluated)} held out{dropped}")
    return parts


def _pooled_leakage(parts: list[Part]) -> LeakageReport:
    """The run's leakage report; a cross-fitted run's pools its folds' (each kept under `folds`, the leaked
    episodes of every fold on top)."""
    if parts[0].fold is None:
        return parts[0].leakage
    dropped = [p.leakage.dropped for p in parts if p.leakage.dropped is not None]
    leaked = {k: v for p in parts for k, v in p.leakage.leaked_episodes.items()}
    return LeakageReport(
        against="evidence", leaked_episodes=dict(sorted(leaked.items())),
        target_turns=sum(p.leakage.target_turns for p in parts),
        evaluation_episodes=sum(p.leakage.evaluation_episodes or 0 for p in parts),
        folds=[p.leakage.model_copy(update={"fold": p.fold}) for p in parts],
        dropped=Dropped(count=sum(d.count for d in dropped),
                        episodes={k: v for d in dropped for k, v in d.episodes.items()}) if dropped else None)


def fold_summary(parts: list[Part]) -> list[dict[str, Any]]:
    return [{"fold": p.fold, "book": p.book.name, "book_version": p.version, "construction_episodes": p.construction,
             "episodes": len(p.episodes), "families": len({trajectory_family(e) for e in p.episodes}),
             "leakage_ok": p.leakage.ok} for p in parts]


@dataclass
class Inputs:
    """What a run evaluates: its parts, the books' version, the pooled leakage report and the episodes' revision."""

    parts: list[Part]
    version: str
    leakage: LeakageReport
    revision: Any
    excluded: dict[str, int] = field(default_factory=dict)  # episodes of the run's environment left out, by why


def load_inputs(config: EvalConfig, ws: Workspace, progress: Progress | None, build_cache: Path,
                book: Worldbook | None, episodes: Sequence[Episode] | None,
                construction: Sequence[Episode] | None) -> Inputs:
    """The run's books and episodes, leakage checked (see `run_eval` for `book`, `episodes` and `construction`)."""
    pool, revision, dataset = _pool(config, ws, episodes)
    _, excluded = exclude_dialogue_only(in_env(pool, config.env))  # counted in the run's environment
    pool, _ = exclude_dialogue_only(pool)  # no tool turn: nothing to predict, nor to build a fold's book from
    if config.folds:
        if book is not None or construction is not None:
            raise BadInputError("a cross-fitted run (folds) builds its own books: give neither book nor construction")
        parts = _fold_parts(config, pool, build_cache, progress)
        version = "folds-" + digest([p.version for p in parts])[:12]
    else:
        parts = [_book_part(config, ws, pool, dataset, book, construction)]
        version = parts[0].version
    leakage = _pooled_leakage(parts)
    if not any(part.episodes for part in parts):
        count = leakage.dropped.count if leakage.dropped else 0
        raise LeakageError(f"leakage: all {count} evaluation episodes leak (drop_leaked), "
                           "nothing is left to evaluate", leakage)
    return Inputs(parts, version, leakage, revision, excluded)
