"""The Home page's view of work: the jobs running now and the latest evaluation runs."""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common.paths import page_file
from workbench.common.text import literal_table, md_escape

RECENT_RUNS = 8


def running_jobs(root: str | Path) -> list[tuple[str, str, str, dict[str, str]]]:
    """(what, progress, page, query) for every build, evaluation run and rule proposal running in the workspace."""
    from workbench.evaluate.jobs import list_jobs
    from worldsmith.evals import proposal_jobs
    from worldsmith.worldbook import build_jobs

    now = time.time()
    jobs = [(f"Building {b.book}", f"{b.fraction:.0%}" + (f", about {b.remaining_s:.0f} s left"
                                                          if b.remaining_s is not None else ""), "build", {})
            for b in build_jobs.list_builds(root) if b.state == "running"]
    jobs += [(f"Evaluating {j.run}", f"running {now - j.started:.0f} s", "evaluate", {})
             for j in list_jobs(root) if j.state == "running"]
    jobs += [(f"Proposing fixes for {p.rule_id} of {p.book}", f"{p.fraction:.0%}", "worldbook",
              {"book": p.book, "rule": p.rule_id})
             for p in proposal_jobs.list_proposals(root) if p.state == "running"]
    return jobs


def render_running_jobs(root: str) -> None:
    try:
        jobs = running_jobs(root)
    except OSError as error:
        st.warning(f"The jobs of the workspace cannot be read: {md_escape(error)}", icon=":material/warning:")
        return
    st.subheader(f"Running jobs ({len(jobs)})", anchor=False)
    if not jobs:
        st.caption("Nothing is running. Builds, evaluation runs and rule proposals started on their pages show here "
                   "(and in the sidebar) while they run; leaving a page never stops them.")
        return
    for what, progress, page, query in jobs:
        st.page_link(page_file(page), label=f"{md_escape(what)}: {md_escape(progress)}", icon=":material/pending:",
                     query_params=query or None)


def render_recent_runs(root: str) -> None:
    """The latest evaluation runs: what they compared, when, and how far they got."""
    from workbench.evaluate.runs import list_runs

    runs = list_runs(root)
    st.subheader(f"Evaluation runs ({len(runs)})", anchor=False)
    if not runs:
        st.caption("No evaluation runs yet: start one on the Evaluate page.")
        return
    rows = [{"run": run.name, "protocol": run.protocol or "", "methods": ", ".join(run.methods),
             "created": run.created or "",
             "state": run.error or ("complete" if run.complete else
                                    f"{run.status or 'incomplete'}" + (f" {run.done}/{run.total}"
                                                                       if run.total else ""))}
            for run in runs[:RECENT_RUNS]]
    st.table(literal_table(pd.DataFrame(rows).set_index("run")))
    more = f" (the {RECENT_RUNS} latest shown)" if len(runs) > RECENT_RUNS else ""
    st.page_link(page_file("evaluate"), label=f"Open Evaluate{more}", icon=":material/leaderboard:")
