"""Rule proposals run as background jobs, as builds do: they outlive the page that started them.

Proposing replays the book on the held-out turns once per candidate patch, which takes a while on real
logs; run in the page session it was lost on navigation. A proposal job is `python -m worldsmith book propose
BOOK --rule ID --version V --progress FILE --json`, started detached by `worldsmith.util.jobs`, its record in
`<ws>/runs/propose/.jobs/<name>.json` (`worldsmith jobs list` finds it). The name is fixed by (book, version,
rule, held-out split), so whoever asks again for the same proposals finds the same job and its report; a new
version of the book is another job. The command appends one JSON line per step to `<name>.progress.jsonl`;
`proposal_status` reads them back as the share done and an estimate of the time left.

    job = launch_proposal(root, ProposalLaunch(book="shop", version=head, rule_id="cancel_order.r1"))
    status = proposal_status(root, job.run)   # state, fraction, step, elapsed_s, remaining_s, report()
"""

from __future__ import annotations

import hashlib
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.evals.proposal_effects import ProposalReport
from worldsmith.util.errors import BadInputError, BusyError
from worldsmith.util.jobs import Job, JobFolder, JobState, failure_message, json_job_outcome, read_json_lines, tail
from worldsmith.util.names import typed_name
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = [
    "ProposalJobError",
    "ProposalJobStatus",
    "ProposalLaunch",
    "launch_proposal",
    "list_proposals",
    "proposal_command",
    "proposal_job_name",
    "proposal_jobs",
    "proposal_progress_path",
    "proposal_status",
    "read_steps",
]

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class ProposalJobError(BadInputError):
    """A proposal job that cannot start: a bad book name, or the same proposals already being computed."""


class ProposalRunningError(BusyError, ProposalJobError):
    """The same proposals are already being computed."""


@dataclass(frozen=True)
class ProposalLaunch:
    """What to propose: patches for `rule_id` of `book` at `version`, measured on `split` (None: the book's
    validation split)."""

    book: str
    version: str
    rule_id: str
    split: str | None = None


def proposal_jobs(root: str | Path) -> JobFolder:
    """The workspace's proposal job records (`<ws>/runs/propose/.jobs`)."""
    return JobFolder(WorkspaceLayout.of(root).runs_dir("propose") / ".jobs", kind="propose")


def proposal_job_name(launch: ProposalLaunch) -> str:
    """The job's name: the book, the rule (file-safe) and a digest of (book, version, rule, split)."""
    book = typed_name(launch.book, "worldbook", ProposalJobError)
    if not launch.rule_id.strip() or not launch.version.strip():
        raise ProposalJobError("a proposal job needs a rule id and a book version")
    digest = hashlib.sha256("\x1f".join([book, launch.version, launch.rule_id, launch.split or ""]).encode())
    rule = _UNSAFE.sub("_", launch.rule_id).strip("._-")[:48] or "rule"
    return f"{book}--{rule}--{digest.hexdigest()[:10]}"


def proposal_progress_path(root: str | Path, name: str) -> Path:
    """Where the proposal job `name` appends its steps (JSON lines)."""
    return proposal_jobs(root).path / f"{name}.progress.jsonl"


def proposal_command(launch: ProposalLaunch, root: str | Path) -> list[str]:
    """The `worldsmith book propose` command line of a launch (the one a terminal would run)."""
    name = proposal_job_name(launch)
    command = [
        sys.executable,
        "-m",
        "worldsmith",
        "book",
        "propose",
        launch.book,
        "--rule",
        launch.rule_id,
        "--version",
        launch.version,
        "--workspace",
        str(Path(root).resolve()),
        "--progress",
        str(proposal_progress_path(root, name)),
        "--json",
    ]
    return command + (["--against", launch.split] if launch.split else [])


def launch_proposal(root: str | Path, launch: ProposalLaunch) -> Job:
    """Start the proposal job detached; refuses while the same proposals are being computed."""
    name = proposal_job_name(launch)
    folder = proposal_jobs(root)
    current = folder.load(name)
    if current is not None and current.alive:
        raise ProposalRunningError(
            f"proposals for {launch.rule_id!r} of {launch.book!r} are already being computed (pid {current.pid})"
        )
    command = proposal_command(launch, root)
    folder.path.mkdir(parents=True, exist_ok=True)
    proposal_progress_path(root, name).write_bytes(b"")  # a new job: the last one's steps go
    return folder.start(name, command, workspace=root, cwd=root)


def read_steps(path: str | Path) -> list[dict[str, Any]]:
    """The steps a proposal job appended (`done`, `total`, `what`, `t`); a torn last line is skipped."""
    return read_json_lines(path)


@dataclass
class ProposalJobStatus:
    """A proposal job now: running or how it ended, how far it got, and (once finished) its report."""

    name: str
    book: str
    rule_id: str
    version: str
    state: JobState
    pid: int
    started: float
    elapsed_s: float
    fraction: float  # proposing, then each proposal's held-out replay (0..1)
    step: str | None  # what it does now, or did last
    remaining_s: float | None  # from the pace so far; None before the first proposal was replayed
    result: dict[str, Any] | None = None  # what `worldsmith book propose --json` printed, or {"error": ...}
    log_tail: str = ""

    @property
    def error(self) -> str | None:
        """Why the job failed (its error message, else the log's end); None unless it failed."""
        return failure_message(self.state, self.result, self.log_tail, "the job ended")

    def report(self) -> ProposalReport | None:
        """The proposals with their held-out effect, once finished (None before, or when it failed)."""
        if self.state != "finished" or self.result is None:
            return None
        return ProposalReport.from_json(self.result)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "book": self.book,
            "rule": self.rule_id,
            "version": self.version,
            "state": self.state,
            "pid": self.pid,
            "started": self.started,
            "elapsed_s": round(self.elapsed_s, 3),
            "fraction": round(self.fraction, 4),
            "step": self.step,
            "remaining_s": None if self.remaining_s is None else round(self.remaining_s, 1),
            "error": self.error,
            "result": self.result,
        }


def _argument(command: list[str], flag: str, default: str = "") -> str:
    try:
        return command[command.index(flag) + 1]
    except (ValueError, IndexError):
        return default


def proposal_status(root: str | Path, name: str) -> ProposalJobStatus | None:
    """The proposal job `name` (`proposal_job_name`), None when none was started here."""
    job = proposal_jobs(root).load(name)
    if job is None:
        return None
    steps = read_steps(proposal_progress_path(root, name))
    outcome = json_job_outcome(job, steps)
    fraction = 0.0
    if outcome.state == "finished":
        fraction = 1.0
    elif steps:
        total = max(int(steps[-1].get("total") or 1), 1)
        fraction = min(1.0, int(steps[-1].get("done") or 0) / total)
    remaining = None
    if outcome.running and 0 < fraction < 1 and len(steps) > 2:  # the pace of the replays, not the fast first step
        remaining = outcome.remaining_s(job.started, fraction)
    return ProposalJobStatus(
        name=name,
        book=job.command[job.command.index("propose") + 1] if "propose" in job.command else "",
        rule_id=_argument(job.command, "--rule"),
        version=_argument(job.command, "--version"),
        state=outcome.state,
        pid=job.pid,
        started=job.started,
        elapsed_s=max(0.0, outcome.elapsed_s),
        fraction=fraction,
        step=str(steps[-1].get("what")) if steps else None,
        remaining_s=remaining,
        result=outcome.result,
        log_tail=tail(job.stderr, 2000),
    )


def list_proposals(root: str | Path) -> list[ProposalJobStatus]:
    """Every proposal job of the workspace, most recent first."""
    found = (proposal_status(root, name) for name in proposal_jobs(root).runs())
    return sorted((status for status in found if status is not None), key=lambda s: s.started, reverse=True)
