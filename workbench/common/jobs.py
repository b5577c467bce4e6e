"""The background jobs running in the workspace, in the sidebar of every page: builds, evaluation runs and rule
proposals, each a link to the page that shows its progress (navigating never stops them: they are detached
processes)."""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from workbench.common.paths import page_file
from workbench.common.text import md_escape

__all__ = ["render_running_jobs_sidebar"]


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
