"""Building a worldbook: traces in, a worldbook and its validation report out.

    result = build_worldbook(train_episodes, name="alfworld", validation=held_out_episodes)
    result.book            # the Worldbook
    result.validation      # per-action coverage and exact match on the held-out trajectories
    result.timings         # seconds per stage, in pipeline order

This module only orchestrates: the stages are declared once, in order, in `book_stages.BOOK_STAGES` and run by
`pipeline.run_stages` (each cached as JSON under `cache_dir` by a fingerprint of its inputs, the config and the code
version, so a rerun or a resumed build skips the stages already done; each reports `StageProgress`). A book for
simulation adds the route table, a stage owned by `sim` (`sim.build_simulator_book`). Validation, leakage checks,
cross-fitting and `build_dataset` (what the CLI and the Build page run) are here too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from worldsmith.traces.dialogue import add_exclusions, exclude_dialogue_only
from worldsmith.traces.families import trajectory_family
from worldsmith.traces.limits import import_limits
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError
from worldsmith.util.json_depth import text_too_deep, too_deep
from worldsmith.workspace.layout import env_family
from worldsmith.worldbook.book_stages import BOOK_STAGES, deterministic_extract
from worldsmith.worldbook.leakage_report import EXAMPLES, LeakageReport, leak_reasons, reasons_by_episode
from worldsmith.worldbook.model import Worldbook
from worldsmith.worldbook.pipeline import (
    Artifacts,
    BuildContext,
    ProgressCallback,
    Stage,
    StageCache,
    StageProgress,
    digest,
    run_stages,
)
from worldsmith.worldbook.rule_replay import ReplayReport, list_formats, replay_evidence
from worldsmith.worldbook.templates import evidence_from_episodes

__all__ = [
    "BuildConfig",
    "MODEL_STAGES",
    "BuildOutcome",
    "BuildResult",
    "CrossFitResult",
    "StageProgress",
    "build_dataset",
    "build_worldbook",
    "builder_view",
    "mixed_environment_warning",
    "cross_fit",
    "demotion_report",
    "deterministic_extract",
    "duplicate_trajectories",
    "exclude_too_deep",
    "families_in_fold_order",
    "family_folds",
    "leakage_check",
    "trajectory_family",
    "transitions",
    "validate",
]


MODEL_STAGES = ("extract", "rules", "notes")  # the stages a model can run (each falls back to the deterministic one)


@dataclass(frozen=True)
class BuildConfig:
    """Everything that changes what the book's stages produce (it is hashed into the stage cache keys)."""

    min_support: int = 3
    min_share: float = 0.05
    max_counterexample_share: float = 0.0
    min_confirmations: int = 2
    max_free_slots: int = 3
    max_forms_per_action: int = 20
    demonstrations_per_action: int = 4
    llm: str | None = None  # a model spec: the `model_stages` then run on the model
    model_stages: tuple[str, ...] = ("rules", "notes")  # of MODEL_STAGES: which stages `llm` runs

    def __post_init__(self) -> None:
        unknown = sorted(set(self.model_stages) - set(MODEL_STAGES))
        if unknown:
            raise BadInputError(f"{', '.join(map(repr, unknown))} cannot run on a model "
                             f"(choose from {', '.join(MODEL_STAGES)})", where="model_stages")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "model_stages": list(self.model_stages)}


@dataclass
class BuildResult:
    book: Worldbook
    timings: dict[str, float]  # seconds per stage, in the order the stages ran
    stage_reports: dict[str, Any] = field(default_factory=dict)
    validation: ReplayReport | None = None
    leakage: LeakageReport | None = None  # the builder's check of `validation` (when given)
    artifacts: Artifacts | None = field(default=None, repr=False, compare=False)  # every stage's output
    excluded: dict[str, int] = field(default_factory=add_exclusions)  # episodes left out, by why

    def report(self) -> dict[str, Any]:
        statuses: dict[str, int] = {}
        for rule in self.book.rules:
            statuses[rule.status.value] = statuses.get(rule.status.value, 0) + 1
        return {"name": self.book.name, "rules": len(self.book.rules), "statuses": statuses,
                "evidence": len(self.book.evidence), "timings_s": self.timings, "stages": self.stage_reports,
                "validation": self.validation.to_json() if self.validation else None,
                "leakage": self.leakage.to_json() if self.leakage else None,
                "excluded": dict(self.excluded), **demotion_report(self.book)}


def demotion_report(book: Worldbook) -> dict[str, Any]:
    """What the build report lists of `worldbook.holdout`: the rules reviewed as supported that did not hold out
    (id, families, held-out exact n/k, literals, reasons), and whether a route table measured held-out exactness."""
    return {"demoted": [demotion.to_json() for demotion in book.demotions], "held_out_measured": book.routes is not None}


def builder_view(episode: Episode) -> Episode:
    """What the book's stages read of an episode: no ground-truth state and no reset info (a tool API's function
    schemas, ~70% of a toolshop episode's bytes, which no stage reads). Passed a stream of episodes, the build
    keeps only these views, so a large dataset is not held twice."""
    view = episode.without_state()
    return view.model_copy(update={"initial_info": {}}) if view.initial_info else view


TOO_DEEP = "too_deep"


def exclude_too_deep(episodes: Iterable[Episode]) -> tuple[list[Episode], dict[str, int]]:
    """The episodes within the import depth cap (`traces.limits.MAX_JSON_DEPTH`), and `{"too_deep": n}` for the
    ones left out: ingest rejects such records, but episodes can come from elsewhere, and one value nested
    thousands deep must cost its episode, never the build (a RecursionError there loses the whole dataset)."""
    limit = import_limits().max_json_depth
    kept: list[Episode] = []
    left_out = 0
    for episode in episodes:
        values = [
            episode.metadata,
            episode.initial_info,
            *(part for turn in episode.turns for part in (turn.action.arguments, turn.info)),
        ]
        texts = [
            episode.initial_observation.text if episode.initial_observation else None,
            *(turn.observation.text for turn in episode.turns),
        ]
        if any(too_deep(value, limit) for value in values) or any(text_too_deep(text, limit) for text in texts):
            left_out += 1
        else:
            kept.append(episode)
    return kept, {TOO_DEEP: left_out}


def _buildable(episodes: Iterable[Episode]) -> tuple[list[Episode], dict[str, int]]:
    """The episodes the stages take (builder views with tool turns, within the depth cap), and the counts left out."""
    kept, dialogue = exclude_dialogue_only(builder_view(episode) for episode in episodes)
    kept, deep = exclude_too_deep(kept)
    return kept, add_exclusions(dialogue, deep)


def build_worldbook(episodes: Iterable[Episode], *, name: str, config: BuildConfig = BuildConfig(),
                    validation: Iterable[Episode] | None = None, cache_dir: str | Path | None = None,
                    workspace_root: str | Path | None = None, env_id: str | None = None,
                    progress: ProgressCallback | None = None, stages: Sequence[Stage] = BOOK_STAGES) -> BuildResult:
    """Build a worldbook from trajectories (ground-truth state is never read) by running `stages` in order, and
    validate it on `validation` trajectories when given. A simulator's book adds `sim`'s route stage
    (`sim.build_simulator_book`). Dialogue-only episodes (no tool turn) and ones nested past the depth cap
    (`exclude_too_deep`) are left out, counted in `excluded`."""
    episodes, excluded = _buildable(episodes)
    hashes = [episode.content_hash() for episode in episodes]
    context = BuildContext(config=config, name=name, env_id=env_id, workspace_root=workspace_root,
                           episode_hashes=hashes)
    artifacts = Artifacts()
    artifacts.put("episodes", episodes, digest([(e.id, h) for e, h in zip(episodes, hashes, strict=True)]))
    runs = run_stages(stages, artifacts, context, cache=StageCache(Path(cache_dir) if cache_dir is not None else None),
                      progress=progress)
    result = BuildResult(book=artifacts["book"], timings={run.stage: run.seconds for run in runs},
                         stage_reports=context.reports, artifacts=artifacts, excluded=excluded)
    if validation is not None:
        held_out, held_excluded = _buildable(validation)
        result.excluded = add_exclusions(excluded, held_excluded)
        result.leakage = leakage_check(episodes, held_out)
        result.validation = validate(result.book, held_out)
    return result


# ------------------------------------------------------------------------------------- validation
def validate(book: Worldbook, episodes: Iterable[Episode]) -> ReplayReport:
    """Replay the book's supported rules over trajectories with their observed prefixes."""
    return replay_evidence(book.rules, evidence_from_episodes(episodes), formats=list_formats(book))


def transitions(episode: Episode) -> tuple[tuple[str, str], ...]:
    """(action text, observation) per turn, as the evidence records them: what a verbatim copy repeats."""
    return tuple((t.action.raw if t.action.raw is not None else t.action.name, t.observation.text)
                 for t in episode.turns)


def duplicate_trajectories(evaluation: Iterable[Episode],
                           evidence: Mapping[str, tuple[tuple[str, str], ...]]) -> dict[str, str]:
    """Evaluated trajectories that are an evidence trajectory (`{episode id: transitions}`), or a truncated copy of
    one, under another id: `{evaluated id: what it copies}`. The builder's `leakage_check` and the evaluation's
    refusal (`worldbook.leakage.check_leakage`) both flag these, so the two agree."""
    by_first: dict[tuple[str, str], list[tuple[tuple[tuple[str, str], ...], str]]] = {}
    for episode_id, pairs in evidence.items():
        if pairs:
            by_first.setdefault(pairs[0], []).append((pairs, episode_id))
    out: dict[str, str] = {}
    for episode in evaluation:
        signature = transitions(episode)
        for candidate, episode_id in by_first.get(signature[0], []) if signature else []:
            whole = candidate == signature
            if episode_id != episode.id and (whole or (len(signature) > 1 and candidate[:len(signature)] == signature)):
                out[episode.id] = episode_id if whole else f"{episode_id} (its first {len(signature)} turns)"
                break
    return out


def leakage_check(construction: Sequence[Episode], evaluation: Sequence[Episode]) -> LeakageReport:
    """No evaluation episode, target turn or trajectory (verbatim, under another id) may be in the construction
    episodes; shared families are reported only (another trial of a game is not leakage). `leaked_episodes` says
    why each evaluated episode that leaks does (`against="construction"`)."""
    built_ids = {e.id for e in construction}
    built_families = {trajectory_family(e) for e in construction}
    built_turns = {t.id or f"{e.id}#{t.index}" for e in construction for t in e.turns}
    shared_episodes = sorted(e.id for e in evaluation if e.id in built_ids)
    shared_families = sorted({trajectory_family(e) for e in evaluation} & built_families)
    targets = [(e.id, t.id or f"{e.id}#{t.index}") for e in evaluation for t in e.turns]
    leaked_turns = [(e, turn) for e, turn in targets if turn in built_turns]
    duplicated = duplicate_trajectories(evaluation, {e.id: transitions(e) for e in construction})
    built_text = {t.observation.text for e in construction for t in e.turns}
    verbatim = sum(t.observation.text in built_text for e in evaluation for t in e.turns)
    return LeakageReport(
        against="construction",
        leaked_episodes=reasons_by_episode(leak_reasons("construction", shared_episodes, leaked_turns, duplicated)),
        shared_episodes=shared_episodes[:EXAMPLES], leaked_turns=[turn for _, turn in leaked_turns][:EXAMPLES],
        duplicated_trajectories=[f"{a} = {b}" for a, b in sorted(duplicated.items())][:EXAMPLES],
        target_turns=len(targets), evaluation_episodes=len(evaluation), shared_families=shared_families[:EXAMPLES],
        families_disjoint=not shared_families, targets_seen_verbatim_in_construction=verbatim)


@dataclass
class CrossFitResult:
    folds: list[BuildResult]
    families: list[list[str]]

    def summary(self) -> dict[str, Any]:
        reports = [fold.validation for fold in self.folds if fold.validation is not None]
        turns = [turn for report in reports for turn in report.turns]
        pooled = ReplayReport(turns)
        return {"folds": len(self.folds), "pooled": pooled.to_json(),
                "per_fold": [{"families": len(f), "validation": r.totals(), "leakage_ok": fold.leakage.ok
                              if fold.leakage else None}
                             for f, r, fold in zip(self.families, reports, self.folds, strict=False)]}


def families_in_fold_order(episodes: Iterable[Episode]) -> list[str]:
    """The episodes' trajectory families in the fixed hashed order folds are dealt in."""
    return sorted({trajectory_family(e) for e in episodes}, key=lambda f: hashlib.sha256(f.encode()).hexdigest())


def family_folds(episodes: Sequence[Episode], folds: int) -> dict[str, int]:
    """Each trajectory family's fold (0-based), families dealt in a fixed hashed order: cross-fitted builds and
    cross-fitted evaluation (`worldsmith eval --folds`) split the same episodes the same way."""
    if folds < 2:
        raise BadInputError(f"cross-fitting needs at least 2 folds, not {folds}")
    families = families_in_fold_order(episodes)
    if len(families) < folds:
        raise BadInputError(f"{len(families)} trajectory families cannot fill {folds} folds")
    return {family: index % folds for index, family in enumerate(families)}


def cross_fit(episodes: Sequence[Episode], *, name: str, folds: int, config: BuildConfig = BuildConfig(),
              cache_dir: str | Path | None = None, workspace_root: str | Path | None = None,
              progress: ProgressCallback | None = None) -> CrossFitResult:
    """One worldbook per fold (the book's stages: validation replays rules only), each validated on the families
    it did not see (k folds by family)."""
    assignment = family_folds(episodes, folds)
    families = list(assignment)
    results: list[BuildResult] = []
    for fold in range(folds):
        held = [e for e in episodes if assignment[trajectory_family(e)] == fold]
        kept = [e for e in episodes if assignment[trajectory_family(e)] != fold]
        fold_progress = (lambda event, _f=fold: progress(replace(event, stage=f"fold {_f + 1}/{folds}: {event.stage}"))
                         ) if progress else None
        results.append(build_worldbook(kept, name=f"{name}-fold{fold + 1}", config=config, validation=held,
                                       cache_dir=cache_dir, workspace_root=workspace_root, progress=fold_progress))
    return CrossFitResult(results, [[f for f in families if assignment[f] == fold] for fold in range(folds)])


@dataclass
class BuildOutcome:
    """What `build_dataset` did: the saved version, the build, and the cross-fitting summary (with folds)."""

    version: str
    parent: str | None
    result: BuildResult
    episodes: int
    validation_split: str | None
    cross_fit: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    dataset: str | None = None  # the dataset and split it was built from: what its report's numbers stand on
    split: str | None = None

    def to_json(self) -> dict[str, Any]:
        out = {"book": self.result.book.name, "version": self.version, "parent": self.parent,
               "episodes": self.episodes, "dataset": self.dataset, "split": self.split,
               "validation_split": self.validation_split, **self.result.report(),
               "warnings": list(self.warnings)}
        if self.cross_fit is not None:
            out["cross_fit"] = self.cross_fit
        return out


def _default_validation_split(splits: Sequence[str], split: str | None) -> str | None:
    if split is None:
        return None
    return next((s for s in ("validation", "val", "test") if s in splits and s != split), None)


def mixed_environment_warning(episodes: Sequence[Episode]) -> str | None:
    """A warning when the episodes span several environments: one worldbook mixing them describes none well
    (a 128-rule book mixing five environments was once built silently)."""
    counts: dict[str, int] = {}
    for episode in episodes:
        name = env_family(episode.env_id) or "(no environment)"
        counts[name] = counts.get(name, 0) + 1
    if len(counts) < 2:
        return None
    listed = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return (f"the episodes mix {len(counts)} environments: {listed}; a worldbook describes one environment, "
            "choose one (--env / Environment)")


def _update_sources(store: Any, out: str, new: dict[str, Any]) -> list[dict[str, Any]]:
    """The sources a `--update` of `out` reads: those its HEAD was built from, then `new` (unless already one)."""
    if out not in store.names():
        raise BadInputError(f"no worldbook {out!r} to update (build it first with --out {out})")
    earlier = [{"dataset": s["dataset"], "split": s.get("split"), "env": s.get("env")}
               for s in store.info(out, store.head(out)).sources if s.get("dataset")]
    if not earlier:
        raise BadInputError(f"worldbook {out!r} records no dataset it was built from: rebuild it with --out")
    return earlier + ([new] if new not in earlier else [])


def build_dataset(workspace: Any, dataset: str, *, out: str, split: str | None = None,
                  validate_split: str | None = None, env: str | None = None, folds: int = 0,
                  config: BuildConfig = BuildConfig(), message: str = "", author: str = "worldsmith build",
                  progress: ProgressCallback | None = None, stages: Sequence[Stage] = BOOK_STAGES,
                  update: bool = False) -> BuildOutcome:
    """Build a worldbook from a workspace dataset (optionally one environment's episodes, e.g. `alfworld`) with
    `stages` (the CLI and the Build page pass `sim.SIMULATOR_STAGES`: the route table too), validate it on the
    held-out split (default with `split`: validation, else test) and/or by cross-fitting, and save it as a new
    version of `out` (HEAD is its parent).

    `update`: add this dataset's episodes to the book `out`: the new version is built on the union of the sources its
    HEAD was built from and this one (an episode id read twice counts once, first source first), which equals a
    full build on that union; the book's stage cache keeps each episode's extraction, so only the new episodes are
    extracted, and the pooled stages (induction, review, tool rules, routes) run again on the union."""
    from worldsmith.worldbook.store import WorldbookStore, check_book_name

    check_book_name(out)  # before any work: a bad name is refused, nothing written
    store = WorldbookStore.of_workspace(workspace)
    wanted: dict[str, Any] = {"dataset": dataset, "split": split, "env": env}
    sources = _update_sources(store, out, wanted) if update else [wanted]
    read_excluded: list[dict[str, int]] = []

    def chosen(name: str, part: str | None, only: str | None) -> list[Episode]:
        kept, left_out = _buildable(
            e
            for e in workspace.dataset(name).iter_episodes(part)
            if only is None or env_family(e.env_id) == only
        )
        read_excluded.append(left_out)
        return kept

    episodes: list[Episode] = []
    seen: set[str] = set()
    for source in sources:
        read = [e for e in chosen(source["dataset"], source["split"], source["env"]) if e.id not in seen]
        seen.update(e.id for e in read)
        source["episodes"] = len(read)
        episodes += read
    if not episodes:
        where = (f" in split {split!r}" if split else "") + (f" of environment {env!r}" if env else "")
        dialogue = read_excluded[0]["dialogue_only"]
        raise BadInputError(f"dataset {dataset!r} has no episodes{' with tool turns' if dialogue else ''}{where}"
                         + (f" ({dialogue} dialogue-only episodes are left out)" if dialogue else ""))
    warnings = [w for w in [mixed_environment_warning(episodes)] if w]
    held_split = validate_split or _default_validation_split(workspace.dataset(dataset).splits(), split)
    held_out = chosen(dataset, held_split, env) if held_split else None
    cache_dir = workspace.layout.run_dir("build", out) / "cache"
    crossed = None
    if folds:
        crossed = cross_fit(episodes, name=out, folds=folds, config=config, cache_dir=cache_dir,
                            workspace_root=workspace.root, progress=progress).summary()
    result = build_worldbook(episodes, name=out, config=config, validation=held_out, cache_dir=cache_dir,
                             workspace_root=workspace.root, progress=progress, stages=stages)
    result.excluded = add_exclusions(result.excluded, *read_excluded)
    parent = store.head(out) if out in store.names() else None
    validation = result.validation.to_json() if result.validation else (crossed or {}).get("pooled")
    described = f"{dataset}" + (f" ({split})" if split else "") + (f", {env}" if env else "")
    info = store.save(
        result.book, parent=parent, author=author,
        message=message or (f"updated with {described}" if update else f"built from {described}"),
        build={"builder": "model" if config.llm else "deterministic", "config": config.to_json(),
               "stages": {stage.name: stage.settings() for stage in stages}, "timings_s": result.timings,
               "folds": folds, "update": update},
        sources=[{**source, "validation_split": held_split if index == len(sources) - 1 else None}
                 for index, source in enumerate(sources)],
        validation={"status": "validated" if validation else "not validated",
                    **({"totals": validation["totals"], "common_actions": validation["common_actions"]}
                       if validation else {}),
                    "leakage": result.leakage.to_json() if result.leakage else None,
                    **demotion_report(result.book)},
    )
    return BuildOutcome(version=info.version, parent=parent, result=result, episodes=len(episodes),
                        validation_split=held_split, cross_fit=crossed, warnings=warnings, dataset=dataset,
                        split=split)
