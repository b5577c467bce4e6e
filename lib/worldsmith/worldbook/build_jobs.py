"""Builds run as background jobs that outlive whoever started them (the Build page, a notebook).

A build job is `python -m worldsmith build ... --progress FILE --json` started detached by
`worldsmith.util.jobs`, its record in `<ws>/runs/build/.jobs/<book>.json` (one build per book at a time),
where `worldsmith jobs list` finds it too. The build appends one JSON line per stage event to
`<book>.progress.jsonl`; `build_status` reads them back as the share done across the
cross-fitting folds and the final build, the stage running, and an estimate of the time left.

    job = launch_build(root, BuildLaunch(out="shop", dataset="shop", folds=3))
    status = build_status(root, "shop")   # state, fraction, stage, elapsed_s, remaining_s, result
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.util.errors import BadInputError, BusyError
from worldsmith.util.jobs import Job, JobFolder, JobState, failure_message, json_job_outcome, read_json_lines, tail
from worldsmith.util.names import typed_name
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = ["BuildJobError", "BuildJobStatus", "BuildLaunch", "build_command", "build_jobs", "build_status",
           "launch_build", "list_builds", "progress_path", "read_progress"]

_FOLD = re.compile(r"^fold (\d+)/(\d+): ")


class BuildJobError(BadInputError):
    """A build that cannot be started: a bad book name, or a build of that book already running."""


class BuildRunningError(BusyError, BuildJobError):
    """A build of that book is already running."""


@dataclass(frozen=True)
class BuildLaunch:
    """The options of one `worldsmith build`, as the Build page's form collects them (None: the CLI's default)."""

    out: str
    dataset: str
    split: str | None = None
    validate_split: str | None = None
    env: str | None = None
    folds: int = 0
    route_folds: int = 5
    route_turns: int | None = None  # held-out turns of the route table (0: all; None: the CLI's default)
    workers: int | None = None  # processes the route folds run in (None: the CLI's default, one)
    llm: str | None = None
    update: bool = False
    message: str = ""
    author: str = "workbench"
    extra: list[str] = field(default_factory=list)


def build_jobs(root: str | Path) -> JobFolder:
    """The workspace's build job records (`<ws>/runs/build/.jobs`, beside each book's stage cache)."""
    return JobFolder(WorkspaceLayout.of(root).runs_dir("build") / ".jobs", kind="build")


def progress_path(root: str | Path, book: str) -> Path:
    """Where the build of `book` appends its stage events (JSON lines)."""
    return build_jobs(root).path / f"{book}.progress.jsonl"


def _name(book: str) -> str:
    return typed_name(book, "worldbook", BuildJobError)


def build_command(launch: BuildLaunch, root: str | Path) -> list[str]:
    """The `worldsmith build` command line for a launch (the one a terminal would run)."""
    c = launch
    command = [sys.executable, "-m", "worldsmith", "build", "--workspace", str(Path(root).resolve()),
               "--dataset", c.dataset, "--update" if c.update else "--out", _name(c.out),
               "--folds", str(int(c.folds)), "--route-folds", str(int(c.route_folds)), "--author", c.author,
               "--progress", str(progress_path(root, c.out)), "--json"]
    for flag, value in (("--split", c.split), ("--validate-split", c.validate_split), ("--env", c.env),
                        ("--llm", c.llm), ("--message", c.message),
                        ("--route-turns", None if c.route_turns is None else int(c.route_turns)),
                        ("--workers", None if c.workers is None else int(c.workers))):
        if value not in (None, ""):
            command += [flag, str(value)]
    return command + list(c.extra)


def launch_build(root: str | Path, launch: BuildLaunch) -> Job:
    """Start the build detached; refuses while a build of the same book is running."""
    name = _name(launch.out)
    folder = build_jobs(root)
    current = folder.load(name)
    if current is not None and current.alive:
        raise BuildRunningError(f"a build of {name!r} is already running (pid {current.pid})")
    command = build_command(launch, root)
    folder.path.mkdir(parents=True, exist_ok=True)
    progress_path(root, name).write_bytes(b"")  # a new build: the last one's events go
    return folder.start(name, command, workspace=root, cwd=root)


def read_progress(path: str | Path) -> list[dict[str, Any]]:
    """The stage events a build appended (`StageProgress.to_json()` and `t`, seconds since the epoch); a torn
    last line is skipped."""
    return read_json_lines(path)


def _fraction(event: dict[str, Any], folds: int) -> float:
    """The share of the whole build done at `event`: each fold, then the final build, one equal phase."""
    stage = str(event.get("stage", ""))
    match = _FOLD.match(stage)
    phases = folds + 1
    phase = int(match.group(1)) - 1 if match else folds
    total = max(int(event.get("total") or 1), 1)
    done = int(event.get("index") or 0) + (event.get("state") != "started")
    return min(1.0, (phase + min(done, total) / total) / phases)


@dataclass
class BuildJobStatus:
    """A build job now: running or how it ended, how far it got, and (once finished) its outcome."""

    book: str
    state: JobState
    pid: int
    started: float
    command: list[str]
    elapsed_s: float
    fraction: float  # the share done across the folds and the final build (0..1)
    stage: str | None  # the stage running or last finished
    remaining_s: float | None  # an estimate from the pace so far; None until a stage has finished
    events: list[dict[str, Any]]
    result: dict[str, Any] | None = None  # what `worldsmith build --json` printed: the outcome, or {"error": ...}
    log_tail: str = ""

    @property
    def error(self) -> str | None:
        """Why the build failed (its error message, else the log's end), None unless it failed."""
        return failure_message(self.state, self.result, self.log_tail, "the build ended")

    def to_json(self) -> dict[str, Any]:
        return {"book": self.book, "state": self.state, "pid": self.pid, "started": self.started,
                "command": self.command, "elapsed_s": round(self.elapsed_s, 3), "fraction": round(self.fraction, 4),
                "stage": self.stage, "remaining_s": None if self.remaining_s is None else round(self.remaining_s, 1),
                "error": self.error, "result": self.result, "events": self.events}


def _folds(command: list[str]) -> int:
    try:
        return max(0, int(command[command.index("--folds") + 1]))
    except (ValueError, IndexError):
        return 0


def build_status(root: str | Path, book: str) -> BuildJobStatus | None:
    """The build job of `book`, None when none was started here."""
    job = build_jobs(root).load(_name(book))
    if job is None:
        return None
    events = read_progress(progress_path(root, book))
    outcome = json_job_outcome(job, events)
    fraction = 1.0 if outcome.state == "finished" else \
        (_fraction(events[-1], _folds(job.command)) if events else 0.0)
    remaining = None
    if outcome.running and 0 < fraction < 1 and any(e.get("state") == "finished" for e in events):
        remaining = outcome.remaining_s(job.started, fraction)
    return BuildJobStatus(book=book, state=outcome.state, pid=job.pid, started=job.started, command=job.command,
                          elapsed_s=max(0.0, outcome.elapsed_s), fraction=fraction,
                          stage=str(events[-1].get("stage")) if events else None, remaining_s=remaining,
                          events=events, result=outcome.result, log_tail=tail(job.stderr, 2000))


def list_builds(root: str | Path) -> list[BuildJobStatus]:
    """Every build job of the workspace, most recent first."""
    found = (build_status(root, run) for run in build_jobs(root).runs())
    return sorted((status for status in found if status is not None), key=lambda s: s.started, reverse=True)
