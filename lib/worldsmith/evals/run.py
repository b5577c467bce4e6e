"""Run an evaluation into the run store: `run_eval(config, workspace) -> EvalRun`.

    config = EvalConfig(name="alf-heldout", book="alfworld", dataset="alfworld", split="test",
                        methods=["harness", "nearest"], protocol="next-obs")
    run = run_eval(config, workspace, progress=lambda done, total, what: print(done, total, what))
    run.report.methods["harness"]["exact_match"].mean   # with .low, .high, .n (an `EvalReport`)

A run lives in `<workspace>/runs/eval/<name>/` (config.json, records.jsonl journal, records.parquet,
report.json, report.md, plots/, progress.json: `evals.eval_runs` owns that layout). Its fingerprint hashes the configuration that
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
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

import pandas as pd

from worldsmith.evals.config import EvalConfig
from worldsmith.evals.eval_records import Journal, UnitKey, records_frame, write_records
from worldsmith.evals.eval_runs import EvalRunStore, RunFolder
from worldsmith.evals.inputs import Inputs, Part, digest, fold_summary, load_inputs
from worldsmith.evals.protocols import method_models
from worldsmith.evals.report import build_report, write_report
from worldsmith.evals.report_model import EvalReport
from worldsmith.evals.units import UnitComputer, eval_unit, unit_context, unit_payload
from worldsmith.traces.model import Episode
from worldsmith.util.code_version import code_version
from worldsmith.util.errors import ConflictError
from worldsmith.util.executors import InlineExecutor, UnitOutcome, make_executor
from worldsmith.util.progress import Progress
from worldsmith.workspace import Workspace
from worldsmith.worldbook.model import Worldbook

__all__ = ["EvalConfig", "EvalRun", "Progress", "RunConflictError", "run_eval", "run_folder"]


class RunConflictError(ConflictError, ValueError):
    """The run folder holds a run of another configuration (its fingerprint differs)."""


@dataclass
class EvalRun:
    """A finished (or resumed) run: where it is, its records and report."""

    directory: Path
    config: EvalConfig
    fingerprint: str
    records: pd.DataFrame
    report: EvalReport
    computed: int  # units (method x episode) computed by this call
    reused: int  # units found done in the run folder

    @property
    def report_path(self) -> Path:
        return RunFolder(self.directory).report_path


def run_folder(workspace: Workspace | str | Path, name: str) -> Path:
    """The folder of evaluation run `name` in a workspace (`EvalRunStore(root).run(name).path`)."""
    root = workspace.root if isinstance(workspace, Workspace) else Path(workspace)
    return EvalRunStore(root).run(name).path


def _resolve_spec(spec: str | None, root: Path) -> str | None:
    """A models.toml name becomes its spec; a spec stays as it is."""
    if not spec:
        return None
    from worldsmith.llm.spec import resolve_spec

    return resolve_spec(spec, root)


@dataclass
class _Opened:
    """A run folder opened for this configuration: the resolved configuration, its fingerprint and provenance."""

    folder: RunFolder
    config: EvalConfig  # with the book version resolved
    fingerprint: str
    provenance: dict[str, Any]  # dataset_revision, code_version, llm_spec, judge_spec


def _open_run(config: EvalConfig, store: EvalRunStore, inputs: Inputs, llm_spec: str | None,
              judge_spec: str | None) -> _Opened:
    """Fingerprint the run, refuse a folder holding another configuration, and (re)write config.json."""
    resolved = config.model_copy(update={"book_version": inputs.version})
    code = code_version()  # records made by other code are never resumed into a run
    fingerprint = digest({"config": resolved.fingerprinted(), "book_version": inputs.version,
                          "dataset_revision": inputs.revision, "llm": llm_spec, "judge": judge_spec, "code": code})
    folder = store.run(config.name)
    stored = folder.read_config()
    if stored is not None and stored.get("fingerprint") != fingerprint:
        raise RunConflictError(f"run {config.name!r} at {folder.path} was made with another configuration "
                               f"(fingerprint {str(stored.get('fingerprint'))[:12]} != {fingerprint[:12]}): choose "
                               "another name or delete that folder")
    provenance = {"dataset_revision": inputs.revision, "code_version": code, "llm_spec": llm_spec,
                  "judge_spec": judge_spec}
    folder.write_config({**resolved.model_dump(mode="json"), "fingerprint": fingerprint, **provenance,
                         "created": datetime.now(UTC).isoformat(timespec="seconds")})
    return _Opened(folder, resolved, fingerprint, provenance)


_Unit = tuple[int, Episode, str, str]  # (part index, episode, method, protocol)


@dataclass
class _Tally:
    """The run's units in report order, how many are done, and how many this call computed."""

    order: list[UnitKey]  # (method, episode id, protocol)
    done: int
    reused: int
    started: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    computed: int = 0

    @property
    def total(self) -> int:
        return len(self.order)


class _ProgressFile:
    """progress.json while the units run: `running` as they finish, `failed` (with the error) when the run stops."""

    def __init__(self, folder: RunFolder, tally: _Tally) -> None:
        self.folder, self.tally = folder, tally

    def write(self, status: str, message: str, error: str | None = None) -> None:
        self.folder.write_progress(self.tally.done, self.tally.total, status, message, self.tally.started, error)

    def __enter__(self) -> _ProgressFile:
        self.write("running", "starting")
        return self

    def __exit__(self, kind: type[BaseException] | None, failure: BaseException | None,
                 traceback: TracebackType | None) -> None:
        if failure is not None:
            self.write("failed", "stopped", error=f"{type(failure).__name__}: {failure}")


def _outcomes(config: EvalConfig, opened: _Opened, parts: list[Part], todo: list[_Unit], journal: Journal,
              root: Path, stack: contextlib.ExitStack) -> Iterator[UnitOutcome]:
    """The units' outcomes as they finish: in this process, a process pool or Ray (`workers`, `ray_address`);
    what they hold open (models, environments, the pool) is closed by `stack`."""
    llm_spec, judge_spec = opened.provenance["llm_spec"], opened.provenance["judge_spec"]
    executor = make_executor(config.workers, config.ray_address)
    if isinstance(executor, InlineExecutor):
        computer = UnitComputer(config, root, llm_spec, judge_spec, journal)
        stack.callback(computer.close)
        outcomes = executor.run(_compute_here, computer, [(parts[i], e, m, p) for i, e, m, p in todo])
    else:
        context = unit_context(opened.fingerprint, config, root, llm_spec, judge_spec, list(parts))
        outcomes = executor.run(eval_unit, context, [unit_payload(i, e, m, p) for i, e, m, p in todo])
    stack.enter_context(contextlib.closing(outcomes))
    return outcomes


def _compute_here(computer: UnitComputer, unit: tuple[Part, Episode, str, str]) -> dict[str, Any]:
    return computer.compute(*unit)


def _run_units(config: EvalConfig, opened: _Opened, parts: list[Part], journal: Journal, root: Path,
               progress: Progress | None) -> _Tally:
    """Compute the units the journal does not have, appending each as it finishes. The first failing unit stops
    the run with its own error (progress.json then says failed)."""
    units = [(index, episode, method, protocol) for protocol in config.protocols or () for index, part in
             enumerate(parts) for episode in part.episodes for method in config.methods]
    todo = [unit for unit in units if not journal.done(unit[2], unit[1].id, unit[3])]
    done = len(units) - len(todo)
    tally = _Tally(order=[(method, episode.id, protocol) for _, episode, method, protocol in units], done=done,
                   reused=done)
    with contextlib.ExitStack() as stack:
        status = stack.enter_context(_ProgressFile(opened.folder, tally))
        for outcome in _outcomes(config, opened, parts, todo, journal, root, stack):
            index, episode, method, protocol = todo[outcome.index]
            if outcome.kind != "ok":
                raise outcome.error or RuntimeError(f"unit {method} on {episode.id} ({protocol}): {outcome.message}")
            journal.append(outcome.value)  # only the driver writes the run store
            tally.computed += 1
            tally.done += 1
            several = f"{protocol}: " if len(config.protocols or ()) > 1 else ""
            message = f"{parts[index].prefix(config.folds)}{several}{method} on {episode.id}"
            status.write("running", message)
            if progress is not None:
                progress(tally.done, tally.total, message)
    return tally


def _judge_usage(journal: Journal, order: list[UnitKey]) -> dict[str, int]:
    usage = {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0}
    for key in order:
        for name in usage:
            usage[name] += int(journal.units[key].get("judge_usage", {}).get(name, 0))
    return usage


def _finish(config: EvalConfig, opened: _Opened, inputs: Inputs, journal: Journal, tally: _Tally) -> EvalRun:
    """records.parquet, report.json, report.md and plots/ from the journal; progress.json then says done."""
    keep = set(tally.order)
    rows = [r for r in journal.records(tally.order) if (r.method, r.episode_id, r.protocol) in keep]
    write_records(opened.folder.records_path, rows)
    frame = records_frame(rows)
    judge_spec = opened.provenance["judge_spec"]
    extra = {**({"judge_usage": _judge_usage(journal, tally.order)} if judge_spec else {}),
             **({"folds": fold_summary(inputs.parts)} if config.folds else {}), "excluded": inputs.excluded,
             "models": method_models(config.methods, opened.provenance["llm_spec"])}
    provenance = {k: opened.provenance[k] for k in ("dataset_revision", "code_version", "llm_spec")}
    report = build_report(
        frame, run=config.name, protocol=config.primary, protocols=list(config.protocols or ()),
        fingerprint=opened.fingerprint,
        config={**opened.config.model_dump(mode="json"), **provenance},
        methods=list(config.methods), judge=judge_spec, leakage=inputs.leakage, resamples=config.resamples,
        seed=config.seed, confidence=config.confidence, fidelity_metric=config.divergence_metric, extra=extra)
    written = EvalReport.model_validate(write_report(report, opened.folder.path))
    opened.folder.write_progress(tally.done, tally.total, "done", "report written", tally.started)
    return EvalRun(directory=opened.folder.path, config=opened.config, fingerprint=opened.fingerprint, records=frame,
                   report=written, computed=tally.computed, reused=tally.reused)


def run_eval(config: EvalConfig, workspace: Workspace | str | Path, progress: Progress | None = None, *,
             book: Worldbook | None = None, episodes: Sequence[Episode] | None = None,
             construction: Sequence[Episode] | None = None) -> EvalRun:
    """Evaluate `config.methods` on the held-out episodes under each of `config.protocols` (by default open loop
    and teacher forced: drift and next-obs), into the run store.

    The worldbook and episodes come from the workspace (store and dataset) unless given: `book` (a
    book built in code, e.g. for the construction-size curve), `episodes` (the evaluation set) and
    `construction` (the episodes the book was built from: the builder's leakage check and the
    seen/unseen families then use them). A cross-fitted run (`config.folds`) builds its books from
    the episodes, so it takes neither `book` nor `construction`. Raises `LeakageError` before running
    anything when the evaluation targets are in a book's evidence, `RunConflictError` when the run
    folder holds another configuration.
    """
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    store = EvalRunStore(ws.root)
    llm_spec, judge_spec = _resolve_spec(config.llm, ws.root), _resolve_spec(config.judge, ws.root)
    inputs = load_inputs(config, ws, progress, store.build_cache, book, episodes, construction)
    opened = _open_run(config, store, inputs, llm_spec, judge_spec)
    journal = opened.folder.journal()
    tally = _run_units(config, opened, inputs.parts, journal, ws.root, progress)
    return _finish(config, opened, inputs, journal, tally)
