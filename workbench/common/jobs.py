"""The background jobs of the workspace, as every page that launches one shows them: in the sidebar of every page
(builds, evaluation runs and rule proposals, each a link to the page that shows its progress: navigating never
stops them, they are detached processes), and on their own page with one line of progress and time left and a Stop
button (`worldsmith jobs stop` from a terminal)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Protocol

import streamlit as st

from workbench.common.paths import page_file
from workbench.common.text import md_escape

__all__ = ["remaining_s", "render_running_jobs_sidebar", "render_stop_button", "seconds_text", "was_stopped"]

STOPPED = "jobs_stopped"  # {(run, start time)} of the jobs stopped from this session



class JobFolder(Protocol):
    """A folder of job records (`worldsmith.util.jobs.JobFolder`: `EvalRunStore(root).jobs`, `build_jobs(root)`...)."""

    def stop(self, run: str, *, grace_s: float = 10.0) -> bool: ...

    def load(self, run: str) -> Any: ...


def seconds_text(value: float) -> str:
    """A duration as a person reads it: `40 s`, `2.5 min`."""
    value = max(0.0, float(value))
    return f"{value:.0f} s" if value < 90 else f"{value / 60:.1f} min"


def remaining_s(started: float, done: float, total: float, now: float | None = None) -> float | None:
    """Time left at the pace so far (None before the first unit is done)."""
    if done <= 0 or total <= 0:
        return None
    elapsed = (time.time() if now is None else now) - started
    return max(0.0, elapsed * (total - done) / done)


def was_stopped(run: str, started: float, returncode: int | None) -> bool:
    """Whether the job of `run` started at `started` was stopped: by this session's Stop button, or by a signal (its
    exit code, known when this server started it; `worldsmith jobs stop` sends SIGTERM)."""
    return (run, started) in st.session_state.get(STOPPED, set()) or (returncode is not None and returncode < 0)


def render_stop_button(folder: JobFolder, run: str, *, key: str, what: str = "job") -> None:
    """A Stop button for the running job `run` of `folder`: SIGTERM to its process group, SIGKILL after a few
    seconds; the page reruns and shows it stopped."""
    if st.button("Stop", key=key, icon=":material/stop_circle:",
                 help=f"stop this {md_escape(what)} (what it wrote so far stays)"):
        job = folder.load(run)
        with st.spinner(f"Stopping the {md_escape(what)}…"):
            if folder.stop(run, grace_s=5.0) and job is not None:
                st.session_state.setdefault(STOPPED, set()).add((run, job.started))
        st.rerun()


def render_running_jobs_sidebar(root: str | Path) -> None:
    """A sidebar link per running build and rule proposal (with its share done) and per running evaluation run."""
    from workbench.evaluate.jobs import list_jobs
    from worldsmith.evals import proposal_jobs
    from worldsmith.worldbook import build_jobs

    try:
        builds = [s for s in build_jobs.list_builds(root) if s.state == "running"]
        runs = [j for j in list_jobs(root) if j.state == "running"]
        proposals = [p for p in proposal_jobs.list_proposals(root) if p.state == "running"]
    except OSError:
        return
    for build in builds:
        st.sidebar.page_link(page_file("build"), label=f"Building {md_escape(build.book)}: {build.fraction:.0%}",
                             icon=":material/construction:")
    for run in runs:
        st.sidebar.page_link(page_file("evaluate"), label=f"Evaluating {md_escape(run.run)}",
                             icon=":material/leaderboard:")
    for proposal in proposals:
        st.sidebar.page_link(page_file("worldbook"), label=f"Proposing fixes for {md_escape(proposal.rule_id)}: "
                             f"{proposal.fraction:.0%}", icon=":material/auto_fix_high:",
                             query_params={"book": proposal.book, "rule": proposal.rule_id})
