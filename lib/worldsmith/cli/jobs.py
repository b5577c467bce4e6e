"""`worldsmith jobs list|stop`: the workspace's background jobs (runs started from the workbench) from their records."""

from __future__ import annotations

import argparse
from datetime import datetime
from pathlib import Path
from typing import Any

from worldsmith.cli.common import EXIT_OK, CommandError, add_common, emit_json, workspace_from
from worldsmith.envace.training_runs import launch_jobs
from worldsmith.evals.eval_runs import EvalRunStore
from worldsmith.evals.proposal_jobs import proposal_jobs
from worldsmith.util.jobs import Job, stop
from worldsmith.worldbook.build_jobs import build_jobs

__all__ = ["find_jobs", "job_json", "register", "run_list", "run_stop", "workspace_jobs"]


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("jobs", help="background jobs of the workspace: list them, stop one")
    actions = parser.add_subparsers(dest="jobs_command", required=True, metavar="ACTION")

    listing = actions.add_parser("list", help="running and ended jobs, most recent first")
    add_common(listing)
    listing.set_defaults(handler=run_list)

    stopping = actions.add_parser("stop", help="stop a running job (SIGTERM, then SIGKILL after --grace seconds)")
    stopping.add_argument("name", help="the job's run name")
    stopping.add_argument("--kind", help="eval, train, sweep, build or propose: which job, when runs of two kinds share the name")
    stopping.add_argument("--grace", type=float, default=10.0, help="seconds to wait before SIGKILL (default 10)")
    add_common(stopping)
    stopping.set_defaults(handler=run_stop)


def workspace_jobs(root: str | Path) -> list[Job]:
    """Every job recorded in the workspace (evaluation runs, training runs, sweeps, builds and rule proposals), most
    recent first."""
    folders = (EvalRunStore(root).jobs, launch_jobs(root), build_jobs(root), proposal_jobs(root))
    found = [job for folder in folders for job in folder.jobs()]
    return sorted(found, key=lambda job: job.started, reverse=True)


def find_jobs(root: str | Path, run: str, kind: str | None = None) -> list[Job]:
    """The jobs recorded for run `run` (of `kind` when given: eval, train, sweep, build, propose), most recent
    first."""
    return [job for job in workspace_jobs(root) if job.run == run and kind in (None, job.kind)]


def job_json(job: Job) -> dict[str, Any]:
    """A job as `--json` prints it: its record and its state now."""
    return {**job.to_json(), "state": job.state}


def _line(job: Job) -> str:
    when = datetime.fromtimestamp(job.started).strftime("%Y-%m-%d %H:%M:%S")
    code = "" if job.returncode is None else f" (exit {job.returncode})"
    return f"{job.kind:<6} {job.run:<32} {job.state}{code}  pid {job.pid}  started {when}  log {job.stderr}"


def run_list(args: argparse.Namespace) -> int:
    jobs = workspace_jobs(workspace_from(args).root)
    if getattr(args, "json", False):
        emit_json({"jobs": [job_json(job) for job in jobs]})
    elif not jobs:
        print("no jobs in this workspace")
    else:
        for job in jobs:
            print(_line(job))
    return EXIT_OK


def run_stop(args: argparse.Namespace) -> int:
    jobs = find_jobs(workspace_from(args).root, args.name, args.kind)
    if not jobs:
        raise CommandError(f"no job named {args.name!r}" + (f" of kind {args.kind!r}" if args.kind else ""))
    if len({job.kind for job in jobs}) > 1:
        kinds = ", ".join(sorted({job.kind for job in jobs}))
        raise CommandError(f"jobs of several kinds are named {args.name!r} ({kinds}): choose one with --kind")
    job = jobs[0]
    stopped = stop(job, grace_s=args.grace)
    if getattr(args, "json", False):
        emit_json({**job_json(job), "stopped": stopped})
    else:
        print(f"stopped {job.kind} job {job.run} (pid {job.pid})" if stopped
              else f"{job.kind} job {job.run} was not running ({job.state})")
    return EXIT_OK
