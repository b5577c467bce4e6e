"""Run an evaluation into the run store: `run_eval(config, workspace) -> EvalRun`.

    config = EvalConfig(name="alf-heldout", book="alfworld", dataset="alfworld", split="test",
                        methods=["harness", "nearest"], protocol="next-obs")
    run = run_eval(config, workspace, progress=lambda done, total, what: print(done, total, what))
    run.report["methods"]["harness"]["exact_match"]     # {"mean", "low", "high", "n"}

A run lives in `<workspace>/runs/eval/<name>/` (config.json, records.jsonl journal, records.parquet,
report.json, report.md, plots/, progress.json). Its fingerprint hashes the configuration that
changes records (not the run name nor the bootstrap settings) with the worldbook version, the
dataset revision and the package's code fingerprint (`util.code_version`): rerunning the same
configuration resumes (finished units are not recomputed) and only recomputes the report, while a
different configuration under the same name is refused.
Leakage is checked before anything runs: evaluation targets in the book's evidence stop the run,
or with `drop_leaked` the leaked episodes are left out and the report names them and why.

With `folds=K` (K >= 2) the run is cross-fitted, as `worldsmith build --folds K` is: the episodes
of the split (and environment) are dealt into K folds by trajectory family (`family_folds`), each
fold's book is built deterministically (`BuildConfig()`) from the other folds and evaluated on that
fold's episodes only, and the records (with their `fold`) are pooled into one report. No stored book
is read: `book` only names the fold books (`<book>-fold<k>`, default the dataset's name).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import orjson
import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from worldsmith.evals.leakage import LeakageError, check_leakage, evidence_families
from worldsmith.evals.novelty import NoveltyIndex
from worldsmith.evals.protocols import method_kind, needs_llm
from worldsmith.evals.records import Journal, records_frame, write_records
from worldsmith.evals.report import build_report, write_report
from worldsmith.evals.units import UnitComputer, eval_unit, unit_context, unit_payload
from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.code_version import code_version
from worldsmith.util.executors import InlineExecutor, make_executor
from worldsmith.util.names import check_name
from worldsmith.util.progress import Progress
from worldsmith.workspace import Workspace
from worldsmith.worldbook.build import build_worldbook, family_folds, trajectory_family
from worldsmith.worldbook.model import Worldbook

__all__ = ["EvalConfig", "EvalRun", "Progress", "RunConflictError", "run_eval", "run_folder"]

# Fields that do not change any record: left out of the fingerprint, so a rerun with other bootstrap
# settings (or under a copy's name) reuses the records.
_NOT_FINGERPRINTED = frozenset({"name", "resamples", "confidence", "workers", "ray_address"})


class RunConflictError(ValueError):
    """The run folder holds a run of another configuration (its fingerprint differs)."""


class EvalConfig(BaseModel):
    """What an evaluation run is: book, episodes, methods, protocol, models, seeds and bootstrap settings."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Run name: the folder under <workspace>/runs/eval/.")
    book: str | None = Field(default=None, description="Worldbook name in the workspace store (with folds: only the "
                                                       "name of the fold books, default the dataset's).")
    book_version: str | None = Field(default=None, description="Version (default: HEAD when the run starts).")
    folds: int = Field(default=0, ge=0, description="Cross-fit: K >= 2 folds by trajectory family, each evaluated "
                                                     "with a book built from the others (0: one stored book).")
    drop_leaked: bool = Field(default=False, description="Leave leaked episodes out of the evaluation set (the report "
                                                         "names them and why) instead of refusing the run.")
    dataset: str = Field(description="Dataset of the held-out episodes.")
    split: str | None = Field(default=None, description="Split of the dataset to evaluate on (default: all).")
    env: str | None = Field(default=None, description="Only episodes whose env id starts with this (e.g. alfworld).")
    episodes: list[str] | None = Field(default=None, description="Only these episode ids.")
    max_episodes: int | None = Field(default=None, ge=1, description="At most this many episodes (sorted by id).")
    max_turns: int | None = Field(default=None, ge=1, description="Score at most this many turns per episode.")
    methods: list[str] = Field(default_factory=lambda: ["harness", "nearest"], min_length=1)
    protocol: Literal["next-obs", "drift", "w2r"] = "next-obs"
    llm: str | None = Field(default=None, description="Model spec of the model-backed methods.")
    judge: str | None = Field(default=None, description="Model spec of the LLM judge (none: no judge).")
    policy: str = Field(default="expert", description="W2R policy: expert, random or llm (on --llm).")
    max_steps: int = Field(default=50, ge=1, description="W2R: the policy's step limit in simulation and for real.")
    real_env: str | None = Field(default=None, description="W2R: registry name of the real environment "
                                                           "(default: from each episode's metadata / env id).")
    divergence_metric: Literal["exact_match", "token_f1"] = "exact_match"
    divergence_threshold: float = Field(default=1.0, gt=0.0, le=1.0,
                                        description="Drift: a turn diverges when the metric is below this.")
    max_tokens: int = Field(default=256, ge=1)
    resamples: int = Field(default=10_000, ge=100)
    confidence: float = Field(default=0.95, gt=0.5, lt=1.0)
    seed: int = 0
    workers: int = Field(default=0, ge=0, description="Units at once: a local process pool when >= 2 (0, 1: in "
                                                       "this process); with ray_address at most this many Ray tasks "
                                                       "(0: the cluster's CPUs).")
    ray_address: str | None = Field(default=None, description="Run the units as Ray tasks: 'local' starts a Ray on "
                                                               "this machine, else a cluster address "
                                                               "(ray://head:10001 or head:6379).")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return check_name(value, "run")

    @field_validator("methods")
    @classmethod
    def _methods(cls, value: list[str]) -> list[str]:
        for method in value:
            method_kind(method)
        if len(set(value)) != len(value):
            raise ValueError(f"methods repeat: {value}")
        return value

    @model_validator(mode="after")
    def _book(self) -> EvalConfig:
        if self.folds == 1:
            raise ValueError("folds: 0 (a stored book) or at least 2 (cross-fitted books)")
        if not self.folds and not self.book:
            raise ValueError("set book (--book NAME), or cross-fit with folds >= 2 (--folds K)")
        if self.folds and self.book_version:
            raise ValueError("book_version names a stored book: a cross-fitted run builds its own")
        return self

    @model_validator(mode="after")
    def _models(self) -> EvalConfig:
        needing = [m for m in self.methods if needs_llm(m)]
        if needing and not self.llm:
            raise ValueError(f"methods {', '.join(needing)} need a model: set llm (--llm SPEC)")
        if self.policy not in ("expert", "random", "llm"):
            raise ValueError(f"policy {self.policy!r}: choose expert, random or llm")
        if self.policy == "llm" and self.protocol == "w2r" and not self.llm:
            raise ValueError("the llm policy needs a model: set llm (--llm SPEC)")
        return self

    def fingerprinted(self) -> dict[str, Any]:
        return {k: v for k, v in self.model_dump(mode="json").items() if k not in _NOT_FINGERPRINTED}


@dataclass
class EvalRun:
    """A finished (or resumed) run: where it is, its records and report."""

    directory: Path
    config: EvalConfig
    fingerprint: str
    records: pd.DataFrame
    report: dict[str, Any]
    computed: int  # units (method x episode) computed by this call
    reused: int  # units found done in the run folder

    @property
    def report_path(self) -> Path:
        return self.directory / "report.json"


def run_folder(workspace: Workspace | str | Path, name: str) -> Path:
    root = workspace.root if isinstance(workspace, Workspace) else Path(workspace)
    return root / "runs" / "eval" / name


def _digest(value: Any) -> str:
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS, default=str)).hexdigest()


def _resolve_spec(spec: str | None, root: Path) -> str | None:
    """A models.toml name becomes its spec; a spec stays as it is."""
    if not spec:
        return None
    from worldsmith.llm.spec import resolve_spec

    return resolve_spec(spec, root)


def _in_env(episodes: Iterable[Episode], env: str | None) -> list[Episode]:
    return [e for e in episodes if not env or (e.env_id or "").split("/")[0] == env or
            (e.env_id or "").startswith(env)]


def _select(episodes: Sequence[Episode], config: EvalConfig) -> list[Episode]:
    chosen = _in_env((e for e in episodes if e.turns), config.env)
    if config.episodes is not None:
        wanted = set(config.episodes)
        missing = wanted - {e.id for e in chosen}
        if missing:
            raise ValueError(f"episodes not in the evaluation set: {', '.join(sorted(missing)[:5])}")
        chosen = [e for e in chosen if e.id in wanted]
    chosen.sort(key=lambda e: e.id)
    repeated = sorted({a.id for a, b in zip(chosen, chosen[1:], strict=False) if a.id == b.id})
    if repeated:
        raise ValueError(f"episode ids repeat in the evaluation set: {', '.join(repeated[:5])}")
    if config.max_episodes is not None:
        chosen = chosen[: config.max_episodes]
    if not chosen:
        raise ValueError(f"no episodes with turns to evaluate in dataset {config.dataset!r}"
                         + (f" split {config.split!r}" if config.split else "")
                         + (f" environment {config.env!r}" if config.env else ""))
    return chosen


def _write_progress(folder: Path, done: int, total: int, status: str, message: str, started: str,
                    error: str | None = None) -> None:
    atomic_write_json(folder / "progress.json", {
        "done": done, "total": total, "status": status, "message": message, "started": started,
        "updated": datetime.now(UTC).isoformat(timespec="seconds"), "error": error})


@dataclass
class _Part:
    """One book and the episodes it is evaluated on: the whole run, or one fold of a cross-fitted run."""

    book: Worldbook
    version: str
    episodes: list[Episode]
    families: set[str]  # trajectory families of the book's evidence: their records are "seen" tasks
    leakage: dict[str, Any]
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
        return pool, "inline-" + _digest([(e.id, e.content_hash()) for e in pool])[:12], None
    dataset = ws.dataset(config.dataset)
    return list(dataset.iter_episodes(config.split)), dataset.revision, dataset


def _families(book: Worldbook, candidates: Iterable[Episode], leakage: dict[str, Any]) -> set[str]:
    families, unresolved = evidence_families(book, candidates)
    leakage.update({"evidence_families": len(families), "evidence_episodes_unresolved": len(unresolved)})
    return families


def _leak_free(book: Worldbook, episodes: list[Episode], construction: Sequence[Episode] | None,
               drop: bool) -> tuple[list[Episode], dict[str, Any]]:
    """The episodes, leakage checked: refused (`LeakageError`), or with `drop` the leaked ones left out, the report
    then describing the episodes kept and naming the dropped ones and why (`dropped`)."""
    leakage = check_leakage(book, episodes, construction=construction, raise_on_leak=not drop)
    if leakage["ok"]:
        return episodes, leakage
    kept = [e for e in episodes if e.id not in leakage["leaked_episodes"]]
    dropped = {"count": len(episodes) - len(kept), "episodes": leakage["leaked_episodes"]}
    return kept, {**(check_leakage(book, kept, construction=construction) if kept else leakage), "dropped": dropped}


def _book_part(config: EvalConfig, ws: Workspace, pool: list[Episode], dataset: Any, book: Worldbook | None,
               construction: Sequence[Episode] | None) -> _Part:
    """The run's one book (stored, or given) on the selected episodes, leakage checked."""
    sources: list[dict[str, Any]] = []
    if book is None:
        from worldsmith.worldbook.store import WorldbookStore

        store = WorldbookStore(ws.root / "worldbooks")
        version = config.book_version or store.head(config.book)
        book = store.load(config.book, version)
        sources = store.info(config.book, version).sources
    else:
        version = config.book_version or "inline-" + _digest(book.model_dump(mode="json"))[:12]
    chosen, leakage = _leak_free(book, _select(pool, config), construction, config.drop_leaked)
    if construction is not None:
        candidates: Iterable[Episode] = construction
    else:  # streamed: only the ids and families of the evidence episodes are kept
        streams = [pool] if dataset is None else [dataset.iter_episodes()]
        for source in sources:
            name = source.get("dataset") if isinstance(source, dict) else None
            if name and name != config.dataset and name in ws.list_datasets():
                streams.append(ws.dataset(name).iter_episodes())
        candidates = itertools.chain.from_iterable(streams)
    return _Part(book, version, chosen, _families(book, candidates, leakage), leakage)


def _fold_parts(config: EvalConfig, pool: list[Episode], cache_dir: Path, progress: Progress | None) -> list[_Part]:
    """Cross-fitting: per fold, a book built from the other folds' episodes, on the fold's selected episodes."""
    base = _in_env(pool, config.env)  # what `worldsmith build --folds` deals into folds
    chosen = _select(pool, config)
    assignment = family_folds(base, config.folds)
    total = len(chosen) * len(config.methods)
    parts = []
    for fold in range(config.folds):
        held = [e for e in chosen if assignment[trajectory_family(e)] == fold]
        if not held:
            continue
        kept = [e for e in base if assignment[trajectory_family(e)] != fold]
        book = build_worldbook(kept, name=f"{config.book or config.dataset}-fold{fold + 1}", cache_dir=cache_dir).book
        evaluated, leakage = _leak_free(book, held, kept, config.drop_leaked)
        parts.append(_Part(book, _digest(book.model_dump(mode="json"))[:12], evaluated,
                           _families(book, kept, leakage), leakage, fold=fold + 1, construction=len(kept)))
        if progress is not None:
            dropped = f" ({len(held) - len(evaluated)} leaked, dropped)" if len(evaluated) < len(held) else ""
            progress(0, total, f"fold {fold + 1}/{config.folds}: book built from {len(kept)} episodes, "
                               f"{len(evaluated)} held out{dropped}")
    return parts


def _pooled_leakage(parts: list[_Part]) -> dict[str, Any]:
    """The run's leakage report; a cross-fitted run's pools its folds' (each kept under `folds`)."""
    if parts[0].fold is None:
        return parts[0].leakage
    pooled = {"ok": all(p.leakage["ok"] for p in parts), "target_turns": sum(p.leakage["target_turns"] for p in parts),
              "evaluation_episodes": sum(p.leakage["evaluation_episodes"] for p in parts),
              "folds": [{"fold": p.fold, **p.leakage} for p in parts]}
    dropped = [p.leakage["dropped"] for p in parts if "dropped" in p.leakage]
    if dropped:
        pooled["dropped"] = {"count": sum(d["count"] for d in dropped),
                             "episodes": {k: v for d in dropped for k, v in d["episodes"].items()}}
    return pooled


def _fold_summary(parts: list[_Part]) -> list[dict[str, Any]]:
    return [{"fold": p.fold, "book": p.book.name, "book_version": p.version, "construction_episodes": p.construction,
             "episodes": len(p.episodes), "families": len({trajectory_family(e) for e in p.episodes}),
             "leakage_ok": p.leakage["ok"]} for p in parts]


_Unit = tuple[int, Episode, str]  # (part index, episode, method)


def _computed(config: EvalConfig, todo: list[_Unit], parts: list[_Part], root: Path, llm_spec: str | None,
              judge_spec: str | None, journal: Journal, fingerprint: str) -> Iterator[tuple[_Unit, dict[str, Any]]]:
    """The units' journal entries as they finish: in this process, a process pool or Ray (`workers`,
    `ray_address`). The first failing unit stops the run with its own error, as in this process."""
    executor = make_executor(config.workers, config.ray_address)
    if isinstance(executor, InlineExecutor):
        computer = UnitComputer(config, root, llm_spec, judge_spec, journal)
        outcomes = executor.run(_compute_here, computer, [(parts[i], e, m) for i, e, m in todo])
    else:
        computer = None
        context = unit_context(fingerprint, config, root, llm_spec, judge_spec, list(parts))
        outcomes = executor.run(eval_unit, context, [unit_payload(i, e, m) for i, e, m in todo])
    try:
        with contextlib.closing(outcomes):
            for outcome in outcomes:
                if outcome.kind != "ok":
                    raise outcome.error or RuntimeError(f"unit {todo[outcome.index][2]} on "
                                                        f"{todo[outcome.index][1].id}: {outcome.message}")
                yield todo[outcome.index], outcome.value
    finally:
        if computer is not None:
            computer.close()


def _compute_here(computer: UnitComputer, unit: tuple[_Part, Episode, str]) -> dict[str, Any]:
    return computer.compute(*unit)


def run_eval(config: EvalConfig, workspace: Workspace | str | Path, progress: Progress | None = None, *,
             book: Worldbook | None = None, episodes: Sequence[Episode] | None = None,
             construction: Sequence[Episode] | None = None) -> EvalRun:
    """Evaluate `config.methods` on the held-out episodes under `config.protocol`, into the run store.

    The worldbook and episodes come from the workspace (store and dataset) unless given: `book` (a
    book built in code, e.g. for the construction-size curve), `episodes` (the evaluation set) and
    `construction` (the episodes the book was built from: the builder's leakage check and the
    seen/unseen families then use them). A cross-fitted run (`config.folds`) builds its books from
    the episodes, so it takes neither `book` nor `construction`. Raises `LeakageError` before running
    anything when the evaluation targets are in a book's evidence, `RunConflictError` when the run
    folder holds another configuration.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    root = ws.root
    llm_spec, judge_spec = _resolve_spec(config.llm, root), _resolve_spec(config.judge, root)

    # -- the books, the episodes, leakage and families
    pool, revision, dataset = _pool(config, ws, episodes)
    if config.folds:
        if book is not None or construction is not None:
            raise ValueError("a cross-fitted run (folds) builds its own books: give neither book nor construction")
        parts = _fold_parts(config, pool, root / "runs" / "eval" / ".build-cache", progress)
        version = "folds-" + _digest([p.version for p in parts])[:12]
    else:
        parts = [_book_part(config, ws, pool, dataset, book, construction)]
        version = parts[0].version
    leakage = _pooled_leakage(parts)
    if not any(part.episodes for part in parts):
        raise LeakageError(f"leakage: all {leakage['dropped']['count']} evaluation episodes leak (drop_leaked), "
                           "nothing is left to evaluate", leakage)

    resolved = config.model_copy(update={"book_version": version})
    code = code_version()  # records made by other code are never resumed into a run
    fingerprint = _digest({"config": resolved.fingerprinted(), "book_version": version, "dataset_revision": revision,
                           "llm": llm_spec, "judge": judge_spec, "code": code})
    folder = run_folder(root, config.name)
    stored = folder / "config.json"
    if stored.exists():
        previous = orjson.loads(stored.read_bytes()).get("fingerprint")
        if previous != fingerprint:
            raise RunConflictError(f"run {config.name!r} at {folder} was made with another configuration "
                                   f"(fingerprint {str(previous)[:12]} != {fingerprint[:12]}): choose another name "
                                   "or delete that folder")
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(stored, {**resolved.model_dump(mode="json"), "fingerprint": fingerprint,
                               "dataset_revision": revision, "code_version": code, "llm_spec": llm_spec,
                               "judge_spec": judge_spec,
                               "created": datetime.now(UTC).isoformat(timespec="seconds")})

    # -- the units
    journal = Journal(folder / "records.jsonl")
    units = [(index, episode, method) for index, part in enumerate(parts) for episode in part.episodes
             for method in config.methods]
    order = [(method, episode.id) for _, episode, method in units]
    total = len(order)
    done = sum(journal.done(m, e) for m, e in order)
    reused = done
    todo = [unit for unit in units if not journal.done(unit[2], unit[1].id)]
    started = datetime.now(UTC).isoformat(timespec="seconds")
    _write_progress(folder, done, total, "running", "starting", started)
    computed = 0
    try:
        for (index, episode, method), entry in _computed(config, todo, parts, root, llm_spec, judge_spec, journal,
                                                          fingerprint):
            journal.append(entry)  # only the driver writes the run store
            computed += 1
            done += 1
            message = f"{parts[index].prefix(config.folds)}{method} on {episode.id}"
            _write_progress(folder, done, total, "running", message, started)
            if progress is not None:
                progress(done, total, message)
    except BaseException as failure:
        _write_progress(folder, done, total, "failed", "stopped", started, error=f"{type(failure).__name__}: {failure}")
        raise

    # -- records.parquet and the report
    rows = journal.records(order)
    keep = set(order)
    rows = [r for r in rows if (r["method"], r["episode_id"]) in keep]
    write_records(folder / "records.parquet", rows)
    frame = records_frame(rows)
    judge_usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for key in order:
        for name in judge_usage:
            judge_usage[name] += int(journal.units[key].get("judge_usage", {}).get(name, 0))
    extra = {**({"judge_usage": judge_usage} if judge_spec else {}),
             **({"folds": _fold_summary(parts)} if config.folds else {})}
    report = build_report(
        frame, run=config.name, protocol=config.protocol, fingerprint=fingerprint,
        config={**resolved.model_dump(mode="json"), "dataset_revision": revision, "code_version": code,
                "llm_spec": llm_spec},
        methods=list(config.methods), judge=judge_spec, leakage=leakage, resamples=config.resamples,
        seed=config.seed, confidence=config.confidence, fidelity_metric=config.divergence_metric, extra=extra)
    report = write_report(report, folder)
    _write_progress(folder, done, total, "done", "report written", started)
    return EvalRun(directory=folder, config=resolved, fingerprint=fingerprint, records=frame, report=report,
                   computed=computed, reused=reused)
