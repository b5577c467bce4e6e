"""A build launched on the Build page runs as a background job (`worldsmith.worldbook.build_jobs`): leaving the page, or
closing the tab, does not stop it, and the page shows its progress again when you come back.

The session remembers the book it launched (`BUILD_JOB`); builds launched elsewhere (another tab, the CLI with
the same job folder) that are still running are listed too. While one runs, a fragment re-reads its progress
every second; once it ends the whole page reruns and shows the outcome (the build report, or why it failed).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common.jobs import render_stop_button, seconds_text, was_stopped
from workbench.common.text import md_code, md_escape
from workbench.worldbook.build_report import render_build_report
from worldsmith.worldbook import build_jobs

__all__ = ["BUILD_JOB", "BUILD_LAST", "progress_text", "render_build_jobs", "start_build"]

BUILD_JOB = "build_job"  # the book whose build this session launched
BUILD_LAST = "build_last"  # (book, job start time, the outcome JSON) of this session's last finished build


def progress_text(status: build_jobs.BuildJobStatus) -> str:
    """One line: the stage running, the time taken and the estimate of the time left."""
    stage = status.stage or "starting"
    left = f" · about {seconds_text(status.remaining_s)} left" if status.remaining_s is not None else ""
    return f"{stage} · {status.fraction:.0%} · {seconds_text(status.elapsed_s)} elapsed{left}"


def start_build(root: str | Path, launch: build_jobs.BuildLaunch) -> bool:
    """Launch the build in the background and remember it in the session; False (with the error shown) if it
    cannot start."""
    try:
        build_jobs.launch_build(root, launch)
    except (build_jobs.BuildJobError, OSError) as error:
        st.error(f"Build failed: {md_escape(error)}", icon=":material/error:")
        return False
    st.session_state[BUILD_JOB] = launch.out.strip()
    st.session_state.pop(BUILD_LAST, None)
    return True


def _stages(status: build_jobs.BuildJobStatus) -> pd.DataFrame:
    rows = [{"stage": e.get("stage"), "seconds": e.get("seconds"), "cached": e.get("cached")}
            for e in status.events if e.get("state") == "finished"]
    return pd.DataFrame(rows, columns=["stage", "seconds", "cached"])


def _show_running(root: str, status: build_jobs.BuildJobStatus) -> None:
    st.markdown(f"**Building {md_code(status.book)}** in the background (pid {status.pid:d})")
    st.progress(status.fraction, text=md_escape(progress_text(status)))
    stages = _stages(status)
    if not stages.empty:
        st.dataframe(stages, hide_index=True, key=f"build_job_stages_{status.book}")
    st.caption("You can leave this page: the build goes on, and this page shows it again when you come back.")
    render_stop_button(build_jobs.build_jobs(root), status.book, key=f"build_stop_{status.book}", what="build")


@st.fragment(run_every=1.0)
def _watch(root: str, book: str) -> None:
    status = build_jobs.build_status(root, book)
    if status is None:
        return
    if status.state != "running":
        st.rerun()  # the whole page shows how it ended
    _show_running(root, status)
    st.button("Refresh", key=f"build_job_refresh_{book}", icon=":material/refresh:", type="tertiary",
              help="The progress refreshes every second by itself; this reads it again now.")


def _stopped(root: str, book: str) -> bool:
    job = build_jobs.build_jobs(root).load(book)
    return job is not None and was_stopped(book, job.started, job.returncode)


def render_build_jobs(root: str | Path) -> None:
    """This session's build (running: its progress, live; ended: its report or its error), then the other builds
    still running in the workspace."""
    root_text = str(root)
    mine = st.session_state.get(BUILD_JOB)
    status = build_jobs.build_status(root_text, mine) if mine else None
    if status is not None and status.state == "running":
        _watch(root_text, status.book)
    elif status is not None and status.state == "finished" and status.result is not None:
        last = st.session_state.get(BUILD_LAST)
        if not last or last[:2] != (status.book, status.started):
            st.session_state[BUILD_LAST] = (status.book, status.started, status.result)
    elif status is not None and _stopped(root_text, status.book):
        st.warning(f"Build of {md_code(status.book)} stopped: no new version was saved.", icon=":material/stop_circle:")
    elif status is not None:
        st.error(f"Build of {md_code(status.book)} failed: {md_escape(status.error or 'the build ended')}",
                 icon=":material/error:")
        if status.log_tail.strip():
            with st.expander("The build's log"):
                st.code(status.log_tail, language=None)
    others = [s for s in build_jobs.list_builds(root_text) if s.state == "running" and s.book != mine]
    for other in others:
        with st.container(border=True):
            _show_running(root_text, other)
    last = st.session_state.get(BUILD_LAST)
    if last:
        render_build_report(last[2])
