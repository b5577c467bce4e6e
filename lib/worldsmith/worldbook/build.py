"""The construction pipeline: traces in, a worldbook and its validation report out.

    result = build_worldbook(train_episodes, name="alfworld", validation=held_out_episodes)
    result.book            # the Worldbook
    result.validation      # per-action coverage and exact match on the held-out trajectories

Stages (`stages.STAGES`) run in order as separate functions: align -> extract -> rules -> review ->
schema -> contracts -> notes -> demonstrations -> termination -> tools -> compile. Each stage's output is cached as JSON
under `cache_dir` keyed by a hash of its inputs and the config, so a rerun (or a run resumed after
an interruption) skips the stages already done. The rules and notes stages can run on a model
(`BuildConfig.llm`): every call then goes through the model layer (cached and logged), unusable
output falls back to the deterministic stage, and the report compares the two.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from pydantic import TypeAdapter

from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.code_version import code_version
from worldsmith.worldbook.engine import literal_value
from worldsmith.worldbook.facts import extract_facts, learn_list_format
from worldsmith.worldbook.induce import InductionConfig, induce_rules
from worldsmith.worldbook.model import (
    ActionSchema,
    Demonstration,
    Effect,
    Evidence,
    Note,
    ObservationContract,
    Rule,
    StateSchema,
    Worldbook,
    join_path,
)
from worldsmith.worldbook.replay import ReplayReport, ReviewConfig, list_formats, replay_evidence, review_rules
from worldsmith.worldbook.routing import RouteTable
from worldsmith.worldbook.schema import (
    induce_action_schema,
    induce_contracts,
    induce_notes,
    induce_state_schema,
    pick_demonstrations,
)
from worldsmith.worldbook.stages import Extraction
from worldsmith.worldbook.templates import evidence_from_episodes
from worldsmith.worldbook.termination import Termination, learn_termination
from worldsmith.worldbook.toolrules import ToolRule
from worldsmith.worldbook.writes import learn_tool_rules

__all__ = [
    "BuildConfig",
    "BuildOutcome",
    "BuildResult",
    "CrossFitResult",
    "StageProgress",
    "build_dataset",
    "build_worldbook",
    "mixed_environment_warning",
    "cross_fit",
    "deterministic_extract",
    "duplicate_trajectories",
    "family_folds",
    "leakage_check",
    "trajectory_family",
    "transitions",
    "validate",
]

StageProgress = Callable[[str, int, int], None]  # (stage, done, total): not util.progress.Progress's order


@dataclass(frozen=True)
class BuildConfig:
    """Everything that changes what a build produces (it is hashed into the stage cache keys)."""

    min_support: int = 3
    min_share: float = 0.05
    max_counterexample_share: float = 0.0
    min_confirmations: int = 2
    max_free_slots: int = 3
    max_forms_per_action: int = 20
    demonstrations_per_action: int = 4
    llm: str | None = None  # a model spec: the rules and notes stages then run on the model
    model_stages: tuple[str, ...] = ("rules", "notes")
    route_folds: int = 5  # cross-fitting folds of the route table (sim.routing); 0: no table (rules first)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "model_stages": list(self.model_stages)}


@dataclass
class BuildResult:
    book: Worldbook
    timings: dict[str, float]
    stage_reports: dict[str, Any] = field(default_factory=dict)
    validation: ReplayReport | None = None
    leakage: dict[str, Any] | None = None

    def report(self) -> dict[str, Any]:
        statuses: dict[str, int] = {}
        for rule in self.book.rules:
            statuses[rule.status.value] = statuses.get(rule.status.value, 0) + 1
        return {"name": self.book.name, "rules": len(self.book.rules), "statuses": statuses,
                "evidence": len(self.book.evidence), "timings_s": self.timings, "stages": self.stage_reports,
                "validation": self.validation.to_json() if self.validation else None, "leakage": self.leakage}


# ------------------------------------------------------------------------------------------- stages
def deterministic_extract(evidence: Sequence[Evidence]) -> list[Extraction]:
    """Per transition: canonical action, outcome, the facts its observation shows, the candidate state changes
    (facts that differ from what the episode showed before) and what stays ambiguous."""
    from worldsmith.worldbook.induce import episode_of

    out: list[Extraction] = []
    known: dict[tuple[str, tuple[str, ...]], Any] = {}
    for item in evidence:
        arguments = item.arguments if isinstance(item.arguments, dict) else {}
        facts = extract_facts(item.action, arguments, item.observation)
        episode = episode_of(item.turn_id)
        changes, ambiguities = [], []
        for fact in facts:
            key = (episode, tuple(fact.path))
            if known.get(key, _UNSEEN) != fact.value:
                changes.append(Effect(op="set", path=join_path(fact.path), value=literal_value(fact.value)))
            known[key] = fact.value
            if fact.kind == "list" and len(fact.path) == 2 and arguments:
                ambiguities.append(f"a list with no owner among the arguments, kept as {'.'.join(fact.path)}")
        if not item.observation.strip():
            ambiguities.append("empty observation")
        out.append(Extraction(turn_id=item.turn_id, action=item.action, arguments=arguments,
                              outcome=item.outcome or "success", facts=facts, changes=changes,
                              ambiguities=ambiguities))
    return out


_UNSEEN = object()


def _deterministic_rules(evidence: Sequence[Evidence], config: BuildConfig) -> list[Rule]:
    return induce_rules(evidence, InductionConfig(max_free_slots=config.max_free_slots,
                                                  max_forms_per_action=config.max_forms_per_action,
                                                  min_confirmations=config.min_confirmations))


class _StageCache:
    """Stage outputs as JSON files keyed by a hash of the inputs and config (atomic writes)."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def run(self, stage: str, key: str, adapter: TypeAdapter[Any], compute: Callable[[], Any]) -> tuple[Any, bool]:
        if self.folder is None:
            return compute(), False
        path = self.folder / f"{stage}-{key}.json"
        if path.exists():
            try:
                return adapter.validate_json(path.read_bytes()), True
            except ValueError:
                path.unlink()  # a damaged cache entry is recomputed, never trusted
        value = compute()
        atomic_write_bytes(path, adapter.dump_json(value))
        return value, False


_CODE_VERSION = code_version()  # a cached stage output from other code is never reused


def _digest(*parts: Any) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(orjson.dumps(part, option=orjson.OPT_SORT_KEYS, default=str))
    return digest.hexdigest()[:16]


def _model_stages(config: BuildConfig, workspace_root: str | Path | None) -> tuple[Any, Any] | None:
    if not config.llm:
        return None
    from worldsmith.llm.tracked import open_llm
    from worldsmith.worldbook import model_stages

    return open_llm(config.llm, workspace_root, component="build"), model_stages


def build_worldbook(episodes: Iterable[Episode], *, name: str, config: BuildConfig = BuildConfig(),
                    validation: Iterable[Episode] | None = None, cache_dir: str | Path | None = None,
                    workspace_root: str | Path | None = None, env_id: str | None = None,
                    progress: StageProgress | None = None) -> BuildResult:
    """Build a worldbook from trajectories (ground-truth state is never read) and validate it on
    `validation` trajectories when given."""
    episodes = [episode.without_state() for episode in episodes]
    cache = _StageCache(Path(cache_dir) if cache_dir is not None else None)
    timings: dict[str, float] = {}
    reports: dict[str, Any] = {}
    steps = 11

    def stage(index: int, label: str, key_parts: Sequence[Any], adapter: TypeAdapter[Any],
              compute: Callable[[], Any]) -> Any:
        if progress:
            progress(label, index, steps)
        started = time.perf_counter()
        reports.setdefault(label, {})
        value, cached = cache.run(label, _digest(label, _CODE_VERSION, config.to_json(), *key_parts), adapter,
                                  compute)
        timings[label] = round(time.perf_counter() - started, 4)
        reports[label]["cached"] = cached
        return value

    episode_key = [(e.id, e.content_hash()) for e in episodes]
    evidence: list[Evidence] = stage(0, "align", [episode_key], TypeAdapter(list[Evidence]),
                                     lambda: evidence_from_episodes(episodes))
    evidence_key = _digest([e.model_dump(mode="json") for e in evidence])
    extractions: list[Extraction] = stage(1, "extract", [evidence_key], TypeAdapter(list[Extraction]),
                                          lambda: deterministic_extract(evidence))
    reports["extract"]["facts"] = sum(len(x.facts) for x in extractions)
    model = _model_stages(config, workspace_root)

    def rules_stage() -> list[Rule]:
        deterministic = _deterministic_rules(evidence, config)
        if model is None or "rules" not in config.model_stages:
            return deterministic
        llm, stages_module = model
        report = stages_module.StageReport(stage="rules")
        by_action: dict[str, list[Evidence]] = {}
        for item in evidence:
            by_action.setdefault(item.action, []).append(item)
        drafted: list[Rule] = []
        for action, items in sorted(by_action.items()):
            drafted += stages_module.model_rules(
                action, items, llm, report=report,
                fallback=lambda a, _items: [r for r in deterministic if r.action == a])
        reports["rules"]["model"] = report.to_json()
        reports["rules"]["compared_with_deterministic"] = stages_module.compare_stage_outputs(deterministic, drafted)
        known = {r.id for r in drafted}
        return drafted + [r for r in deterministic if r.id not in known]

    fmt = {"*": learn_list_format(item.observation for item in evidence)}
    rules: list[Rule] = stage(2, "rules", [evidence_key], TypeAdapter(list[Rule]), rules_stage)
    rules = stage(3, "review", [evidence_key, _digest([r.model_dump(mode="json") for r in rules])],
                  TypeAdapter(list[Rule]), lambda: review_rules(rules, evidence, ReviewConfig(
                      min_support=config.min_support, min_share=config.min_share,
                      max_counterexample_share=config.max_counterexample_share), formats=fmt))
    rules_key = _digest([r.model_dump(mode="json") for r in rules])
    schemas: tuple[ActionSchema, StateSchema] = stage(
        4, "schema", [evidence_key, rules_key], TypeAdapter(tuple[ActionSchema, StateSchema]),
        lambda: (induce_action_schema(evidence), induce_state_schema(evidence, rules)))
    contracts: list[ObservationContract] = stage(5, "contracts", [evidence_key, rules_key],
                                                 TypeAdapter(list[ObservationContract]),
                                                 lambda: induce_contracts(evidence, rules))

    def notes_stage() -> list[Note]:
        deterministic = induce_notes(evidence, rules)
        if model is None or "notes" not in config.model_stages:
            return deterministic
        llm, stages_module = model
        report = stages_module.StageReport(stage="notes")
        drafted = stages_module.model_notes(evidence, llm, report=report, fallback=lambda _e: deterministic)
        reports["notes"]["model"] = report.to_json()
        known = {n.id for n in drafted}
        return drafted + [n for n in deterministic if n.id not in known]

    notes: list[Note] = stage(6, "notes", [evidence_key, rules_key], TypeAdapter(list[Note]), notes_stage)
    demonstrations: list[Demonstration] = stage(
        7, "demonstrations", [evidence_key, rules_key], TypeAdapter(list[Demonstration]),
        lambda: pick_demonstrations(evidence, rules, config.demonstrations_per_action))
    termination: Termination | None = stage(8, "termination", [evidence_key], TypeAdapter(Termination | None),
                                             lambda: learn_termination(evidence))
    families = {e.id: trajectory_family(e) for e in episodes}  # look-ups judge the store's completeness by task
    tool_rules: list[ToolRule] = stage(8, "tools", [evidence_key, sorted(families.items())],
                                       TypeAdapter(list[ToolRule]),
                                       lambda: learn_tool_rules(evidence, config, families=families))

    def routes_stage() -> RouteTable | None:
        from worldsmith.sim.routing import learn_routes  # the harness replays held-out folds: sim sits above

        return learn_routes(episodes, replace(config, llm=None), folds=config.route_folds)

    routes: RouteTable | None = None
    if config.route_folds >= 2:
        routes = stage(9, "routes", [episode_key], TypeAdapter(RouteTable | None), routes_stage)
    if progress:
        progress("compile", 10, steps)
    started = time.perf_counter()
    env_ids = sorted({e.env_id for e in episodes if e.env_id})
    book = Worldbook(name=name, env_id=env_id or (env_ids[0] if len(env_ids) == 1 else None),
                     action_schema=schemas[0], state_schema=schemas[1], rules=rules, contracts=contracts,
                     notes=notes, demonstrations=demonstrations, evidence=evidence, routes=routes,
                     termination=termination, tool_rules=tool_rules).canonical()
    timings["compile"] = round(time.perf_counter() - started, 4)
    result = BuildResult(book=book, timings=timings, stage_reports=reports)
    if validation is not None:
        held_out = [episode.without_state() for episode in validation]
        result.leakage = leakage_check(episodes, held_out)
        result.validation = validate(book, held_out)
    if progress:
        progress("done", steps, steps)
    return result


# ------------------------------------------------------------------------------------- validation
def validate(book: Worldbook, episodes: Iterable[Episode]) -> ReplayReport:
    """Replay the book's supported rules over trajectories with their observed prefixes."""
    return replay_evidence(book.rules, evidence_from_episodes(episodes), formats=list_formats(book))


def trajectory_family(episode: Episode) -> str:
    """Trajectories of one family stay in one fold: the episode's declared `family`, else the task (game) it
    plays without trial or seed, else the episode itself (as `worldsmith split` groups them)."""
    if episode.family:
        return episode.family
    task = episode.task_id or episode.id
    return re.sub(r"(/trial_[^/]*|[-_]s\d+$|#.*$)", "", task)


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


def leakage_check(construction: Sequence[Episode], evaluation: Sequence[Episode]) -> dict[str, Any]:
    """No evaluation episode, target turn or trajectory (verbatim, under another id) may be in the construction
    episodes; shared families are reported only (another trial of a game is not leakage). `leaked_episodes` lists
    every evaluated episode that leaks."""
    built_ids = {e.id for e in construction}
    built_families = {trajectory_family(e) for e in construction}
    built_turns = {t.id or f"{e.id}#{t.index}" for e in construction for t in e.turns}
    shared_episodes = sorted(e.id for e in evaluation if e.id in built_ids)
    shared_families = sorted({trajectory_family(e) for e in evaluation} & built_families)
    targets = [(e.id, t.id or f"{e.id}#{t.index}") for e in evaluation for t in e.turns]
    leaked_turns = [turn for _, turn in targets if turn in built_turns]
    duplicated = duplicate_trajectories(evaluation, {e.id: transitions(e) for e in construction})
    leaked = sorted({*shared_episodes, *(e for e, turn in targets if turn in built_turns), *duplicated})
    built_text = {t.observation.text for e in construction for t in e.turns}
    verbatim = sum(t.observation.text in built_text for e in evaluation for t in e.turns)
    return {"ok": not leaked, "shared_episodes": shared_episodes[:20], "leaked_turns": leaked_turns[:20],
            "duplicated_trajectories": [f"{a} = {b}" for a, b in sorted(duplicated.items())][:20],
            "leaked_episodes": leaked, "shared_families": shared_families[:20],
            "families_disjoint": not shared_families, "target_turns": len(targets),
            "targets_seen_verbatim_in_construction": verbatim}


@dataclass
class CrossFitResult:
    folds: list[BuildResult]
    families: list[list[str]]

    def summary(self) -> dict[str, Any]:
        reports = [fold.validation for fold in self.folds if fold.validation is not None]
        turns = [turn for report in reports for turn in report.turns]
        pooled = ReplayReport(turns)
        return {"folds": len(self.folds), "pooled": pooled.to_json(),
                "per_fold": [{"families": len(f), "validation": r.totals(), "leakage_ok": fold.leakage["ok"]
                              if fold.leakage else None}
                             for f, r, fold in zip(self.families, reports, self.folds, strict=False)]}


def family_folds(episodes: Sequence[Episode], folds: int) -> dict[str, int]:
    """Each trajectory family's fold (0-based), families dealt in a fixed hashed order: cross-fitted builds and
    cross-fitted evaluation (`worldsmith eval --folds`) split the same episodes the same way."""
    if folds < 2:
        raise ValueError(f"cross-fitting needs at least 2 folds, not {folds}")
    families = sorted({trajectory_family(e) for e in episodes},
                      key=lambda f: hashlib.sha256(f.encode()).hexdigest())
    if len(families) < folds:
        raise ValueError(f"{len(families)} trajectory families cannot fill {folds} folds")
    return {family: index % folds for index, family in enumerate(families)}


def cross_fit(episodes: Sequence[Episode], *, name: str, folds: int, config: BuildConfig = BuildConfig(),
              cache_dir: str | Path | None = None, workspace_root: str | Path | None = None,
              progress: StageProgress | None = None) -> CrossFitResult:
    """One worldbook per fold, each validated on the families it did not see (k folds by family)."""
    assignment = family_folds(episodes, folds)
    families = list(assignment)
    results: list[BuildResult] = []
    for fold in range(folds):
        held = [e for e in episodes if assignment[trajectory_family(e)] == fold]
        kept = [e for e in episodes if assignment[trajectory_family(e)] != fold]
        fold_progress = (lambda stage, done, total, _f=fold: progress(f"fold {_f + 1}/{folds}: {stage}", done, total)) \
            if progress else None
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

    def to_json(self) -> dict[str, Any]:
        out = {"book": self.result.book.name, "version": self.version, "parent": self.parent,
               "episodes": self.episodes, "validation_split": self.validation_split, **self.result.report(),
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
        name = (episode.env_id or "").split("/")[0] or "(no environment)"
        counts[name] = counts.get(name, 0) + 1
    if len(counts) < 2:
        return None
    listed = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda item: (-item[1], item[0])))
    return (f"the episodes mix {len(counts)} environments: {listed}; a worldbook describes one environment, "
            "choose one (--env / Environment)")


def build_dataset(workspace: Any, dataset: str, *, out: str, split: str | None = None,
                  validate_split: str | None = None, env: str | None = None, folds: int = 0,
                  config: BuildConfig = BuildConfig(), message: str = "", author: str = "worldsmith build",
                  progress: StageProgress | None = None) -> BuildOutcome:
    """Build a worldbook from a workspace dataset (optionally one environment's episodes, e.g. `alfworld`),
    validate it on the held-out split (default with `split`: validation, else test) and/or by cross-fitting,
    and save it as a new version of `out` (HEAD is its parent). What the CLI and the Build page run."""
    from worldsmith.worldbook.store import WorldbookStore, check_book_name

    check_book_name(out)  # before any work: a bad name is refused, nothing written
    source = workspace.dataset(dataset)

    def chosen(part: str | None) -> list[Episode]:
        return [e for e in source.iter_episodes(part) if env is None or (e.env_id or "").split("/")[0] == env]

    episodes = chosen(split)
    if not episodes:
        where = (f" in split {split!r}" if split else "") + (f" of environment {env!r}" if env else "")
        raise ValueError(f"dataset {dataset!r} has no episodes{where}")
    warnings = [w for w in [mixed_environment_warning(episodes)] if w]
    held_split = validate_split or _default_validation_split(source.splits(), split)
    held_out = chosen(held_split) if held_split else None
    cache_dir = workspace.root / "runs" / "build" / out / "cache"
    crossed = None
    if folds:
        crossed = cross_fit(episodes, name=out, folds=folds, config=config, cache_dir=cache_dir,
                            workspace_root=workspace.root, progress=progress).summary()
    result = build_worldbook(episodes, name=out, config=config, validation=held_out, cache_dir=cache_dir,
                             workspace_root=workspace.root, progress=progress)
    store = WorldbookStore(workspace.root / "worldbooks")
    parent = store.head(out) if out in store.names() else None
    validation = result.validation.to_json() if result.validation else (crossed or {}).get("pooled")
    info = store.save(
        result.book, parent=parent, author=author,
        message=message or f"built from {dataset}" + (f" ({split})" if split else "") + (f", {env}" if env else ""),
        build={"builder": "model" if config.llm else "deterministic", "config": config.to_json(),
               "timings_s": result.timings, "folds": folds},
        sources=[{"dataset": dataset, "split": split, "env": env, "episodes": len(episodes),
                  "validation_split": held_split}],
        validation={"status": "validated" if validation else "not validated",
                    **({"totals": validation["totals"], "common_actions": validation["common_actions"]}
                       if validation else {}),
                    "leakage": result.leakage},
    )
    return BuildOutcome(version=info.version, parent=parent, result=result, episodes=len(episodes),
                        validation_split=held_split, cross_fit=crossed, warnings=warnings)
