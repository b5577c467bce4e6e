"""Import trace files into a dataset: detect, stream, deduplicate, quarantine, commit atomically.

With `redact`, every episode is redacted (`traces.redaction`) before it is staged, and so are the rejected
records kept in quarantine: nothing personal is written in the workspace; the mapping is kept apart
(`workspace.redaction`) and written before the commit.

Parts are written in the workspace's staging folder and only moved into the dataset (and
listed in its manifest) once the whole ingest succeeded; under `strict` any reject discards
them. The import report and the quarantine file (rejected records verbatim, one JSON object
per line) are kept in `<workspace>/reports/` whether or not anything was committed. An episode
without a tool turn is stored as dialogue only (its messages) and counted; one with nothing to
keep (no turn, message, task or initial observation) is rejected.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import shutil
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from worldsmith.traces.files import expand_paths
from worldsmith.traces.import_report import FileReport, ImportReport, Reject, RejectLog, TraceFormatError
from worldsmith.traces.importers import detect_format, get_importer
from worldsmith.traces.importers.base import Importer
from worldsmith.traces.limits import import_limits, truncate_raw
from worldsmith.traces.rows import EPISODE_COLUMNS, TURN_COLUMNS, EpisodeRows, episode_to_rows
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.json_depth import text_too_deep
from worldsmith.util.processes import process_alive
from worldsmith.util.staging import MAX_AGE_S, MIN_AGE_S, make_staging, sweep_stale
from worldsmith.workspace.dataset import Dataset, dataset_lock, validate_dataset_name
from worldsmith.workspace.env_identity import (
    EnvProfile,
    choose_environment,
    declared_tool_names,
    system_prompt,
    tool_set_env_id,
    workspace_profiles,
)
from worldsmith.workspace.layout import WorkspaceLayout
from worldsmith.workspace.redaction import DatasetRedaction, RedactionSettings
from worldsmith.workspace.search import update_index
from worldsmith.workspace.storage import PartWriter

__all__ = ["IngestProgress", "ingest_files"]

_log = logging.getLogger(__name__)
_ENV_ID = EPISODE_COLUMNS.index("env_id")
_METADATA = EPISODE_COLUMNS.index("metadata")
_CONTEXT = TURN_COLUMNS.index("context")
_FINAL_CONTEXT = EPISODE_COLUMNS.index("final_context")
# What a turnless episode may still hold worth keeping: its messages, its task, what the environment first showed.
_DIALOGUE = tuple(EPISODE_COLUMNS.index(name) for name in ("final_context", "task", "initial_observation"))
# Columns holding JSON text from outside: each is depth-checked before staging (so `build` never meets a deep value).
_DEEP_EPISODE = tuple(
    EPISODE_COLUMNS.index(name) for name in ("initial_observation", "initial_info", "metadata", "initial_state")
)
_DEEP_TURN = tuple((TURN_COLUMNS.index(name), name) for name in ("action_arguments", "observation", "info", "state"))
_CHAT_FORMATS = frozenset({"openai"})  # chat logs rarely name their environment: their tool set does


@dataclass(slots=True)
class IngestProgress:
    """Reported while an ingest runs (every `every` episodes and at each file boundary)."""

    file: str
    files_done: int
    files_total: int
    episodes: int
    turns: int
    rejected: int
    duplicates: int
    seconds: float


ProgressCallback = Callable[[IngestProgress], None]


def _new_ingest_id() -> str:
    """Sortable by time (microseconds), unique by the random suffix."""
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f") + "-" + secrets.token_hex(3)


class _Quarantine:
    """Rejected records, verbatim up to `MAX_QUARANTINE_RAW` characters (a longer one is cut and says its
    length), one JSON object per line; created on first use, in a temp file named for this process until closed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        self._handle: IO[bytes] | None = None
        self._limit = import_limits().max_quarantine_raw

    def write(self, reject: Reject) -> None:
        if self._handle is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._handle = open(self._tmp, "wb")
        raw, full_length = truncate_raw(reject.raw, self._limit)
        entry = {
            "source": reject.source,
            "line": reject.line,
            "pointer": reject.pointer,
            "reason": reject.reason,
            "raw": raw,
        }
        if full_length is not None:
            entry["raw_truncated_from"] = full_length
        self._handle.write(orjson.dumps(entry, option=orjson.OPT_APPEND_NEWLINE))

    def close(self) -> str | None:
        if self._handle is None:
            return None
        self._handle.close()
        os.replace(self._tmp, self.path)
        return str(self.path)


_TEMP_OWNER = re.compile(r"\.(\d+)\.tmp$")


def _sweep_stale_temps(reports_dir: Path, *, now: float | None = None) -> list[Path]:
    """Remove the quarantine temp files of killed ingests: the writer's process is gone (and the file older than
    `MIN_AGE_S`), or the file is older than `MAX_AGE_S` whatever its name says. The ones removed."""
    if not reports_dir.is_dir():
        return []
    now = time.time() if now is None else now
    removed = []
    for path in reports_dir.glob(".*.tmp"):
        try:
            mtime = path.stat().st_mtime
        except OSError:
            continue
        owner = _TEMP_OWNER.search(path.name)
        gone = owner is None or not process_alive(int(owner.group(1)), mtime)
        if (gone and now - mtime > MIN_AGE_S) or now - mtime > MAX_AGE_S:
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


def ingest_files(
    workspace_root: Path,
    paths: Iterable[str | Path],
    dataset: str,
    *,
    format: str | None = None,
    strict: bool = False,
    progress: ProgressCallback | None = None,
    progress_every: int = 1000,
    env: str | None = None,
    redact: RedactionSettings | None = None,
) -> ImportReport:
    """Import `paths` into dataset `dataset` under `workspace_root`; returns the report.

    With `redact`, e-mails, phone and card numbers and person names are replaced by the dataset's pseudonyms
    before anything is staged (the report's `redaction` counts them and names the mapping file).

    Episodes that name no environment get `env`; chat logs' (OpenAI messages) else one from their file, reported
    as the file's `derived_env` with `derived_from`: the tools the logs declare (their `tools` schemas) when they
    carry them (`tool_set_env_id`), so a train file and a test file of one API get one id whichever tools each
    happens to call. A file that declares none joins the environment of the workspace (or of a file before it)
    whose tools and system prompt it matches (`env_identity.choose_environment`; `env_decision`, `env_reason` and
    `env_candidates` say which and why); when it matches several it keeps an id of its own and the report lists
    them for the user to choose (`Workspace.relabel`); when none, an id from the tools it calls. A worldbook is
    built per environment; `Workspace.relabel` renames one afterwards.

    Never raises on bad input: unreadable files and bad records are reported and quarantined.
    Raises ValueError only for a bad dataset name or unknown `format` (usage errors).
    """
    validate_dataset_name(dataset)
    if format is not None:
        get_importer(format)
    workspace_root = Path(workspace_root)
    if redact is not None:
        with DatasetRedaction(workspace_root, dataset, redact) as redaction:
            return _ingest(workspace_root, paths, dataset, format=format, strict=strict, progress=progress,
                           progress_every=progress_every, env=env, redaction=redaction)
    return _ingest(workspace_root, paths, dataset, format=format, strict=strict, progress=progress,
                   progress_every=progress_every, env=env, redaction=None)


def _ingest(
    workspace_root: Path,
    paths: Iterable[str | Path],
    dataset: str,
    *,
    format: str | None,
    strict: bool,
    progress: ProgressCallback | None,
    progress_every: int,
    env: str | None,
    redaction: DatasetRedaction | None,
) -> ImportReport:
    unreadable: list[tuple[Path, str]] = []
    files = expand_paths(paths, unreadable)
    layout = WorkspaceLayout.of(workspace_root)
    sweep_stale(layout.staging_dir)  # a killed ingest's parts
    _sweep_stale_temps(layout.reports_dir)  # and its quarantine file
    run = _Ingest(
        workspace_root,
        dataset,
        files,
        format=format,
        strict=strict,
        progress=progress,
        progress_every=progress_every,
        env=env,
        redaction=redaction,
    )
    for folder, why in unreadable:  # reported as an unreadable file is: never skipped in silence
        reason = f"could not list the folder: {why}"
        file_report = FileReport(path=str(folder), error=reason)
        run.report.files.append(file_report)
        run.reject(file_report, Reject(source=str(folder), reason=reason))
    try:
        for done, path in enumerate(files):
            run.read_file(path, done)
        run.commit()
        if run.report.committed:
            _index_new_part(run.dataset_path)
    except BaseException:
        run.writer.abort()
        run.quarantine.close()
        raise
    finally:
        shutil.rmtree(run.staging, ignore_errors=True)
    return run.finish()


def _index_new_part(dataset_path: Path) -> None:
    """Add the committed part to the dataset's full-text index (building it if missing). Best effort: the part is
    committed either way, and a search indexes what the index lacks before it answers."""
    try:
        update_index(Dataset(dataset_path))
    except (sqlite3.Error, OSError) as error:
        _log.warning("search index of %s not updated: %s", dataset_path.name, error)


class _Ingest:
    """One ingest: the staged parts, the dedup sets, the report and quarantine, file by file."""

    def __init__(
        self,
        workspace_root: Path,
        dataset: str,
        files: list[Path],
        *,
        format: str | None,
        strict: bool,
        progress: ProgressCallback | None,
        progress_every: int,
        env: str | None,
        redaction: DatasetRedaction | None = None,
    ) -> None:
        self.files, self.format, self.strict, self.env = files, format, strict, env
        self.redaction = redaction
        self.progress, self.progress_every = progress, progress_every
        self.ingest_id = _new_ingest_id()
        layout = WorkspaceLayout.of(workspace_root)
        self.reports_dir = layout.reports_dir
        self.dataset_path = layout.datasets_dir / dataset
        existing = Dataset(self.dataset_path) if (self.dataset_path / "manifest.json").exists() else None
        # Parts whose episodes the dedup below sees (listed first: parts are only ever added); at commit only
        # parts committed after these are checked again.
        self.checked_parts = {part["episodes"] for part in existing.parts} if existing else set()
        self.hashes = existing.content_hashes() if existing else set()
        self.ids = existing.episode_ids() if existing else set()
        self.report = ImportReport(ingest_id=self.ingest_id, dataset=dataset, strict=strict)
        self.quarantine = _Quarantine(self.reports_dir / f"{self.ingest_id}.quarantine.jsonl")
        self.rejects = RejectLog()
        self.staging = make_staging(layout.staging_dir)  # last: nothing after it fails but the writer
        try:
            self.writer = PartWriter(
                self.staging / "episodes.parquet", self.staging / "turns.parquet", ingest_id=self.ingest_id
            )
        except BaseException:
            shutil.rmtree(self.staging, ignore_errors=True)
            raise
        self.origin: dict[str, FileReport] = {}  # staged episode id -> the file it came from
        self.envless: dict[str, str] = {}  # staged episode id without an environment -> the one its file's tools give
        self.workspace_root = workspace_root
        self.committed_profiles: dict[str, EnvProfile] | None = None  # the workspace's environments, read on need
        self.staged_profiles: dict[str, EnvProfile] = {}  # what this ingest's chat files gave each environment
        self.max_depth = import_limits().max_json_depth
        self.started = time.perf_counter()

    def emit(self, current: str, done: int) -> None:
        if self.progress is not None:
            report = self.report
            self.progress(
                IngestProgress(
                    file=current,
                    files_done=done,
                    files_total=len(self.files),
                    episodes=report.episodes,
                    turns=report.turns,
                    rejected=report.rejected,
                    duplicates=report.duplicates,
                    seconds=time.perf_counter() - self.started,
                )
            )

    def reject(self, file_report: FileReport, item: Reject) -> None:
        if self.redaction is not None:  # the quarantine keeps records verbatim: but for their personal data
            redactor = self.redaction.redactor
            item = Reject(source=item.source, reason=redactor.redact_text(item.reason) or item.reason,
                          line=item.line, pointer=item.pointer, raw=redactor.redact_text(item.raw))
        file_report.rejected += 1
        self.quarantine.write(item)
        self.rejects.add(item)

    def read_file(self, path: Path, done: int) -> None:
        """Stage one file's episodes; a file that cannot be read or parsed is reported, and the ingest goes on."""
        file_report = FileReport(path=str(path))
        self.report.files.append(file_report)
        self.emit(str(path), done)
        try:
            file_report.bytes = path.stat().st_size if path.exists() else 0
            if self.format is not None:
                importer = get_importer(self.format)
            else:
                detection = detect_format(path)
                importer, file_report.detection_score = detection.importer, detection.score
            file_report.format = importer.name
            self._stage_rows(importer, path, file_report, done)
        except TraceFormatError as error:
            file_report.error = error.reason
            self.reject(file_report, Reject(source=str(path), reason=error.reason))
        except (OSError, UnicodeDecodeError) as error:
            file_report.error = f"could not read the file: {error}"
            self.reject(file_report, Reject(source=str(path), reason=file_report.error))
        except _ImporterFailed as failure:
            file_report.error = str(failure)
            self.reject(file_report, Reject(source=str(path), reason=file_report.error))

    def _stage_rows(self, importer: Importer, path: Path, file_report: FileReport, done: int) -> None:
        file_envless: list[str] = []
        declared: set[str] = set()
        found = EnvProfile("")  # what the file's episodes without an environment do: tools, system prompts
        rejected_at: Counter[tuple[str, int | None]] = Counter()  # rejects per source record: its parts'
        for item in _guarded(_read_rows(importer, path), file_report):
            if isinstance(item, Reject):
                rejected_at[(item.source, item.line)] += 1
                self.reject(file_report, item)
                continue
            if not item.turns and not any(item.episode[column] for column in _DIALOGUE):  # nothing at all to keep
                file_report.empty += 1
                self.reject(file_report, _empty(item, path, rejected_at))
                continue
            deep = _too_deep(item, path, self.max_depth)
            if deep is not None:
                self.reject(file_report, deep)
                continue
            if item.episode[_ENV_ID] is None and self.env:
                item = EpisodeRows((*item.episode[:_ENV_ID], self.env, *item.episode[_ENV_ID + 1 :]), item.turns)
            if self.redaction is not None:
                item = self.redaction.redactor.redact_rows(item)
            stored = _add_episode(item, file_report, self.writer, self.hashes, self.ids)
            if stored is not None:
                self.origin[stored] = file_report
                if item.episode[_ENV_ID] is None and importer.name in _CHAT_FORMATS:
                    file_envless.append(stored)
                    found.tools.update(turn[2] for turn in item.turns)
                    found.add_prompt(system_prompt(item.turns[0][_CONTEXT] if item.turns
                                                   else item.episode[_FINAL_CONTEXT]))
                    found.episodes += 1
                    declared.update(declared_tool_names(item.episode[_METADATA]))
            if self.progress is not None and file_report.episodes % self.progress_every == 0:
                self.emit(str(path), done)
        if file_envless:
            self._give_environment(file_report, found, declared)
            self.envless.update(dict.fromkeys(file_envless, file_report.derived_env))

    def _give_environment(self, file_report: FileReport, found: EnvProfile, declared: set[str]) -> None:
        """The environment of a chat file's episodes that name none: from its declared tools, else the environment
        it matches (see `ingest_files`); what it does joins the profiles the next file is matched against."""
        if declared:
            file_report.derived_from = "declared tools"
            file_report.derived_env = found.env = tool_set_env_id(declared)
            found.tools |= declared
        else:
            found.env = tool_set_env_id(found.tools)
            choice = choose_environment(found, self._profiles())
            file_report.derived_from = "matched environment" if choice.decision == "joined" else "called tools"
            file_report.derived_env = found.env = choice.env
            file_report.env_decision, file_report.env_reason = choice.decision, choice.reason
            file_report.env_candidates = choice.candidates
        self.staged_profiles.setdefault(found.env, EnvProfile(found.env)).merge(found)

    def _profiles(self) -> list[EnvProfile]:
        """The workspace's environments (read once, when a file first needs them) with what this ingest added."""
        if self.committed_profiles is None:
            self.committed_profiles = workspace_profiles(WorkspaceLayout.of(self.workspace_root).datasets_dir)
        combined = {env: EnvProfile(env) for env in {*self.committed_profiles, *self.staged_profiles}}
        for source in (self.committed_profiles, self.staged_profiles):
            for env, profile in source.items():
                combined[env].merge(profile)
        return list(combined.values())

    def commit(self) -> None:
        """Move the staged parts into the dataset, unless nothing was staged or `strict` met a reject."""
        self.writer.close()
        if self.envless:
            _set_environments(self.staging / "episodes.parquet", self.envless)
        self.emit("", len(self.files))
        report = self.report
        commit = self.writer.episodes > 0 and not (self.strict and report.rejected > 0)
        if self.redaction is not None:
            if commit:
                self.redaction.keep()  # before the commit: no committed pseudonym is ever missing from it
            report.redaction = self.redaction.summary()
        report.committed = commit and _commit(
            self.dataset_path, self.staging, self.ingest_id, self.writer, report, self.origin, self.checked_parts
        )

    def finish(self) -> ImportReport:
        """The report, with its rejects and quarantine file, saved beside the others."""
        report = self.report
        report.rejects = self.rejects.items
        report.rejects_truncated = self.rejects.truncated
        report.quarantine_path = self.quarantine.close()
        report.seconds = time.perf_counter() - self.started
        report.report_path = str(self.reports_dir / f"{self.ingest_id}.json")
        atomic_write_json(Path(report.report_path), report.model_dump(mode="json"))
        return report


class _ImporterFailed(Exception):
    """An importer raised on some input: that file stops, the ingest goes on."""


def _guarded(items: Iterator[Any], file_report: FileReport) -> Iterator[Any]:
    """Turn an unexpected importer exception into a per-file error (storage errors still propagate)."""
    while True:
        try:
            item = next(items)
        except StopIteration:
            return
        except (TraceFormatError, OSError, UnicodeDecodeError):
            raise
        except Exception as error:  # noqa: BLE001 - an importer bug must not sink the other files
            raise _ImporterFailed(
                f"the {file_report.format} importer failed: {type(error).__name__}: {error}"
            ) from error
        yield item


def _read_rows(importer: Importer, path: Path) -> Iterator[EpisodeRows | Reject]:
    """Rows straight from importers that can emit them (the fast path), else flattened episodes."""
    read_rows = getattr(importer, "read_rows", None)
    if read_rows is not None:
        yield from read_rows(path)
        return
    for item in importer.read(path):
        yield item if isinstance(item, Reject) else episode_to_rows(item)


def _empty(rows: EpisodeRows, path: Path, rejected_at: Counter[tuple[str, int | None]] | None = None) -> Reject:
    """The reject of an episode left with nothing (no turn, no message, no task), where its source says it was, its
    reason in plain words: no tool call at all, or how many of its parts were rejected (their rows say why)."""
    source = dict(zip(EPISODE_COLUMNS, rows.episode, strict=True))
    line = source.get("source_line")
    where = str(source.get("source_path") or path)
    line = int(line) if isinstance(line, int) else None
    parts = (rejected_at or Counter())[(where, line)] if line is not None else 0
    if parts:
        reason = (
            f"nothing left to import: {parts} tool call{'s or results were' if parts != 1 else ' or result was'} "
            f"rejected (see {'those rows' if parts != 1 else 'that row'}) and the conversation has no message "
            f"text to keep as a dialogue (episode {rows.id!r})"
        )
    else:
        reason = f"no tool call in this conversation, and no message text to keep as a dialogue (episode {rows.id!r})"
    return Reject(source=where, line=line, pointer=source.get("source_pointer"), reason=reason)


def _too_deep(rows: EpisodeRows, path: Path, limit: int) -> Reject | None:
    """The reject of an episode holding JSON text nested deeper than `limit` (the import depth cap; tool arguments
    and observations arrive as text, so the record's own depth check cannot see them), naming the turn and field."""
    source = dict(zip(EPISODE_COLUMNS, rows.episode, strict=True))
    where = str(source.get("source_path") or path)
    line = source.get("source_line") if isinstance(source.get("source_line"), int) else None
    problem = next(
        (EPISODE_COLUMNS[column] for column in _DEEP_EPISODE if text_too_deep(rows.episode[column], limit)), None
    )
    if problem is None:
        problem = next(
            (
                f"turn {turn[1]} {name}"
                for turn in rows.turns
                for column, name in _DEEP_TURN
                if text_too_deep(turn[column], limit)
            ),
            None,
        )
    if problem is None:
        return None
    return Reject(
        source=where,
        line=line,
        pointer=source.get("source_pointer"),
        reason=f"{problem} is nested deeper than {limit} levels (WORLDSMITH_IMPORT_MAX_JSON_DEPTH); "
        f"episode {rows.id!r} not imported",
    )


def _set_environments(episodes_path: Path, envs: dict[str, str]) -> None:
    """Give the staged episodes that named no environment the one their file's tool set gives."""
    table = pq.read_table(episodes_path)
    ids = table.column("episode_id").to_pylist()
    current = table.column("env_id").to_pylist()
    column = pa.array([envs.get(e, value) for e, value in zip(ids, current, strict=True)], pa.string())
    pq.write_table(table.set_column(table.schema.get_field_index("env_id"), "env_id", column), episodes_path)


def _add_episode(
    rows: EpisodeRows, file_report: FileReport, writer: PartWriter, hashes: set[str], ids: set[str]
) -> str | None:
    """Stage one episode unless its content is there already; the id it is staged under."""
    digest = rows.content_hash()
    if digest in hashes:
        file_report.duplicates += 1
        return None
    if rows.id in ids:  # same id, other content: keep both, the newcomer with a suffix
        rows = rows.renamed(f"{rows.id}~{digest[:8]}")
        file_report.renamed += 1
    writer.add_rows(rows, digest)
    hashes.add(digest)
    ids.add(rows.id)
    file_report.episodes += 1
    file_report.turns += len(rows.turns)
    if not rows.turns:  # messages only: stored, browsed, left out of building and evaluation
        file_report.dialogue_only += 1
    return rows.id


def _against_committed(
    dataset: Dataset, staging: Path, writer: PartWriter, origin: dict[str, FileReport], checked_parts: set[str]
) -> tuple[int, int]:
    """Under the dataset's lock: drop the staged episodes another ingest committed meanwhile (same content) and
    rename those whose id it took, as `_add_episode` does against what was committed at the start; count them in
    the file reports. (episodes, turns) left to commit.

    Only parts committed since the start (not in `checked_parts`) are read, and the staged turns only when
    something must change: a commit into a large dataset does not re-read it, nor hold its own part in memory."""
    new_parts = [part for part in dataset.parts if part["episodes"] not in checked_parts]
    if not new_parts:
        return writer.episodes, writer.turns
    committed = pa.concat_tables(
        pq.read_table(dataset.path / part["episodes"], columns=["episode_id", "content_hash"]) for part in new_parts
    )
    hashes = set(committed.column("content_hash").to_pylist())
    ids = set(committed.column("episode_id").to_pylist())
    rows = pq.read_table(staging / "episodes.parquet", columns=["episode_id", "content_hash"]).to_pylist()
    dropped = {row["episode_id"] for row in rows if row["content_hash"] in hashes}
    renamed = {
        row["episode_id"]: f"{row['episode_id']}~{row['content_hash'][:8]}"
        for row in rows
        if row["episode_id"] in ids and row["episode_id"] not in dropped
    }
    if not dropped and not renamed:
        return writer.episodes, writer.turns
    episodes = pq.read_table(staging / "episodes.parquet")
    turns = pq.read_table(staging / "turns.parquet")
    turn_counts = turns.group_by("episode_id").aggregate([("turn_index", "count")]).to_pylist()
    per_episode = {row["episode_id"]: row["turn_index_count"] for row in turn_counts}
    for row in rows:
        file_report = origin.get(row["episode_id"])
        if file_report is not None and row["episode_id"] in dropped:
            file_report.episodes -= 1
            file_report.turns -= per_episode.get(row["episode_id"], 0)
            file_report.dialogue_only -= int(row["episode_id"] not in per_episode)
            file_report.duplicates += 1
        elif file_report is not None and row["episode_id"] in renamed:
            file_report.renamed += 1

    def rewrite(table: pa.Table) -> pa.Table:
        ids_column = table.column("episode_id").to_pylist()
        keep = pa.array([episode not in dropped for episode in ids_column])
        table = table.set_column(
            table.schema.get_field_index("episode_id"),
            "episode_id",
            pa.array([renamed.get(e, e) for e in ids_column], pa.string()),
        )
        return table.filter(keep)

    episodes, turns = rewrite(episodes), rewrite(turns)
    pq.write_table(episodes, staging / "episodes.parquet")
    pq.write_table(turns, staging / "turns.parquet")
    return episodes.num_rows, turns.num_rows


def _commit(
    dataset_path: Path,
    staging: Path,
    ingest_id: str,
    writer: PartWriter,
    report: ImportReport,
    origin: dict[str, FileReport],
    checked_parts: set[str],
) -> bool:
    """Move the staged part into the dataset under its lock; False when nothing was left to commit."""
    parts_dir = dataset_path / "parts"
    parts_dir.mkdir(parents=True, exist_ok=True)
    with dataset_lock(dataset_path):
        dataset = Dataset.create(dataset_path)  # the first manifest under the lock: never over another's commit
        n_episodes, n_turns = _against_committed(dataset, staging, writer, origin, checked_parts)
        if n_episodes == 0:  # another ingest committed all of it meanwhile
            return False
        episodes_name = f"parts/{ingest_id}.episodes.parquet"
        turns_name = f"parts/{ingest_id}.turns.parquet"
        os.replace(staging / "episodes.parquet", dataset_path / episodes_name)
        os.replace(staging / "turns.parquet", dataset_path / turns_name)
        manifest = dataset.manifest
        manifest.setdefault("parts", []).append(
            {
                "ingest_id": ingest_id,
                "episodes": episodes_name,
                "turns": turns_name,
                "n_episodes": n_episodes,
                "n_turns": n_turns,
            }
        )
        manifest.setdefault("ingests", []).append(
            {
                "ingest_id": ingest_id,
                "report": f"../../reports/{ingest_id}.json",
                "files": [f.path for f in report.files],
                "at": datetime.now(UTC).isoformat(timespec="seconds"),
            }
        )
        dataset.write_manifest(manifest)
    return True
