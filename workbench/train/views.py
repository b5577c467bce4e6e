"""What the Train page shows: a run's status and live curves, its probes (rehearsed beside real), its checkpoint
evaluations, runs compared, and sweeps as a table and a heat map.

Everything comes from the run store on disk, re-read by a fragment every few seconds while a run
is running, so a page reload or a second browser tab shows the same run. Trace text (actions,
responses) is shown with `st.code`/`st.text`, never as markdown.
"""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.jobs import remaining_s, render_stop_button, seconds_text
from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape
from workbench.train.charts import (
    COMPARABLE,
    alignment_figure,
    compare_figure,
    fidelity_figure,
    loss_figure,
    probe_label,
    reward_figure,
    sweep_heatmap,
    throughput_figure,
)
from workbench.train.jobs import LaunchError, job_record, launch
from workbench.train.runs import TrainRun, evals_of, load_run, metrics_frame, probe_examples
from workbench.train.sweeps import list_sweeps, sweep_table
from worldsmith.envace import TrainingRunStore, training_runs

__all__ = ["REFRESH_S", "render_compare", "render_run", "render_sweeps", "summary_frame"]

REFRESH_S = 3.0
SUMMARY_KEYS = ("objective", "steps", "act_loss_first", "act_loss_last", "rehearse_loss_first", "rehearse_loss_last",
                "rehearsal_fidelity", "reward_first", "reward_last", "tokens_per_s", "time_s", "drift")
_STATE_ICON = {"running": ":material/sync:", "done": ":material/check_circle:", "failed": ":material/error:",
               "stopped": ":material/pause_circle:", "new": ":material/hourglass_empty:"}


def summary_frame(runs: list[TrainRun]) -> pd.DataFrame:
    """One row per run: its knobs (λ, lr, batch) and its summary numbers."""
    rows = []
    for run in runs:
        summary = run.summary or {}
        row: dict[str, Any] = {"run": run.name, "state": run.state, "lam": run.config.get("lam"),
                               "lr": run.config.get("lr"), "batch_size": run.config.get("batch_size")}
        for key in SUMMARY_KEYS:
            row[key] = summary.get(key, run.config.get(key) if key in ("objective", "steps") else None)
        rows.append(row)
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------ one run


def _status(run: TrainRun) -> None:
    progress = min(1.0, run.step / run.steps) if run.steps else 0.0
    st.progress(progress, text=f"{md_escape(run.state)} · step {run.step:d}/{md_escape(run.steps or '?')} · "
                               f"updated {md_escape(run.age())}")
    if run.state == "failed":
        st.error(f"The run failed: {md_escape(run.error or 'no message')}", icon=":material/error:")
        if run.traceback:
            with st.expander("Traceback"):
                st.code(run.traceback, language=None)
    elif run.state == "stopped":
        st.warning("The run's process is gone (killed or crashed) before it finished: launch it again to resume "
                   "from its last checkpoint.", icon=":material/pause_circle:")
    job = job_record(run.path.parent.parent.parent, run.name) if run.path.parent.name == "envace" else None
    if job is not None and job.alive and run.state == "new":
        st.info(f"Starting (pid {job.pid:d}): the run appears here as soon as the trainer writes its status.",
                icon=":material/hourglass_top:")
        if job.log_tail.strip():
            st.code(job.log_tail, language=None)
    if job is not None and not job.alive and run.state in ("new", "stopped") and job.log_tail.strip():
        last = job.log_tail.strip().splitlines()[-1]  # shown in the open: the reason the launch failed
        st.error(f"The launched process ended (exit code {md_escape(job.returncode)}) before training: "
                 f"{md_escape(last)}", icon=":material/error:")
        st.code(job.log_tail, language=None)


def _curves(run: TrainRun) -> None:
    frame = metrics_frame(run.path)
    if frame.empty:
        st.info("No logged steps yet.", icon=":material/hourglass_empty:")
        return
    threshold = (run.config.get("probe") or {}).get("threshold")
    left, right = st.columns(2)
    left.plotly_chart(loss_figure(frame), key=f"tr_loss_{run.name}")
    if any(column in frame for column in ("reward", "reward_rehearse", "adv_mean")):
        right.plotly_chart(reward_figure(frame), key=f"tr_reward_{run.name}")
    else:
        right.plotly_chart(throughput_figure(frame), key=f"tr_tps_{run.name}")
    if any(column in frame for column in ("pg_align_act", "pg_align_rehearse")):
        st.plotly_chart(alignment_figure(frame), key=f"tr_align_{run.name}")
    if "rehearsal_fidelity" in frame:
        probes = probe_examples(run.path)
        last = probes[-1] if probes else dict(run.summary or {}, source=(run.summary or {}).get("probe_source"),
                                              split=(run.summary or {}).get("probe_split"))
        st.plotly_chart(fidelity_figure(frame, threshold, probe_label(last.get("source"), last.get("split"))),
                        key=f"tr_fidelity_{run.name}")
        provenance_caption([TrainingRunStore(run.path).probe_provenance(probes[-1] if probes else None)])
        if probes and "skipped_for_length" in last:
            st.caption(f"Probe items used: {int(last.get('n') or 0):d}; skipped for length (prompt + real response "
                       f"longer than max_seq_len, so no whole reference to score): {int(last['skipped_for_length']):d}.")
        if "drift" in frame and frame["drift"].fillna(False).astype(bool).any():
            steps = frame.loc[frame["drift"].fillna(False).astype(bool), "step"].tolist()
            st.warning(f"Rehearsal drift flagged at step(s) {md_escape(', '.join(map(str, steps)))}: the probe fell "
                       "more than the tolerance below its best.", icon=":material/trending_down:")
    with st.expander("Logged steps"):
        st.dataframe(frame, hide_index=True)


def _probes(run: TrainRun) -> None:
    probes = probe_examples(run.path)
    if not probes:
        st.caption("No probe yet: the probe runs every `probe.every` steps and at the end.")
        return
    steps = [int(row.get("step", 0)) for row in probes]
    index = st.selectbox("Probe at step", list(range(len(probes))), index=len(probes) - 1,
                         format_func=lambda i: f"step {steps[i]} · {probes[i].get('metric')} "
                                               f"{probes[i].get('value') if probes[i].get('value') is not None else '-'}"
                                               + (" · drift" if probes[i].get("drift") else ""),
                         key=f"tr_probe_{run.name}")
    examples = [row for row in probes[index].get("examples") or [] if isinstance(row, dict)]
    if not examples:
        st.caption("This probe kept no examples.")
        return
    table = pd.DataFrame([{"episode": row.get("episode_id"), "turn": row.get("turn"), "action": row.get("action"),
                           "token_f1": row.get("token_f1"), "exact_match": row.get("exact_match"),
                           "edit_similarity": row.get("edit_similarity")} for row in examples])
    st.dataframe(table, hide_index=True, key=f"tr_probe_table_{run.name}")
    provenance_caption([TrainingRunStore(run.path).probe_provenance(probes[index])])
    chosen = st.selectbox("Transition", list(range(len(examples))),
                          format_func=lambda i: f"{examples[i].get('episode_id')} #{examples[i].get('turn')}",
                          key=f"tr_probe_example_{run.name}")
    example = examples[chosen]
    st.caption("Action")
    st.code(str(example.get("action") or ""), language=None)
    real, rehearsed = st.columns(2)
    real.caption("Real response")
    real.code(str(example.get("real") or ""), language=None, wrap_lines=True)
    rehearsed.caption("Rehearsed by the model")
    rehearsed.code(str(example.get("rehearsed") or ""), language=None, wrap_lines=True)


def _evals(root: Path, run: TrainRun) -> None:
    found = evals_of(run.path)
    for name, report in found:
        st.markdown(f"**{md_escape(name)}** · {md_escape(report.get('env'))} · "
                    f"{len(report.get('tasks') or [])} tasks")
        rows = []
        for method, entry in (report.get("methods") or {}).items():
            cost = (report.get("cost") or {}).get(method, {})
            rows.append({"method": method, **{metric: _interval(entry.get(metric), "mean")
                                              for metric in ("success", "score")},
                         "calls/step": cost.get("model_calls_per_step"), "cached share": cost.get("cached_share")})
        for pair, entry in (report.get("pairs") or {}).items():
            rows.append({"method": pair, **{metric: _interval(entry.get(metric), "mean_diff")
                                            for metric in ("success", "score")}})
        st.dataframe(pd.DataFrame(rows), hide_index=True, key=f"tr_eval_{run.name}_{name}")
    if not run.checkpoints:
        return
    with st.form(f"tr_eval_form_{run.name}"):
        st.caption("Evaluate the latest checkpoint in real BFCL, plain against test-time rehearsal")
        left, middle, right, last = st.columns(4)
        k = left.number_input("K sequential", min_value=0, value=1, key=f"tr_eval_k_{run.name}")
        n = middle.number_input("N parallel", min_value=0, value=0, key=f"tr_eval_n_{run.name}")
        tasks = right.number_input("Tasks", min_value=1, value=3, key=f"tr_eval_tasks_{run.name}")
        steps = last.number_input("Actions per task", min_value=1, value=10, key=f"tr_eval_steps_{run.name}")
        submitted = st.form_submit_button("Evaluate", icon=":material/science:")
    if submitted:
        checkpoint = run.path / "checkpoints" / f"step-{run.checkpoints[-1]}"
        out = run.path / "evals" / f"bfcl-k{k}-n{n}-step-{run.checkpoints[-1]}"
        command = [sys.executable, "-m", "worldsmith", "envace", "eval", "--checkpoint", str(checkpoint),
                   "--env", "bfcl", "--rehearse", str(int(k)), "--parallel", str(int(n)), "--n-tasks",
                   str(int(tasks)), "--max-steps", str(int(steps)), "--out", str(out), "--json"]
        try:
            job = launch(root, f"eval-{run.name}", command, kind="eval")
        except (LaunchError, OSError) as error:
            st.error(f"Could not start the evaluation: {md_escape(error)}", icon=":material/error:")
        else:
            st.success(f"Evaluating (pid {job.pid:d}): {md_code(shlex.join(['worldsmith', *command[3:]]))}; "
                       "the results appear here when it finishes.", icon=":material/science:")


def _interval(entry: dict[str, Any] | None, key: str) -> str | None:
    if not entry or entry.get(key) is None:
        return None
    return f"{entry[key]:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def _still_starting(root: Path, run: TrainRun) -> bool:
    job = job_record(root, run.name)
    return run.state == "new" and job is not None and job.alive


def _steer(root: Path, run: TrainRun) -> None:
    """A running run's time taken and left (at its pace so far, when the page launched it), and its Stop button."""
    job = job_record(root, run.name)
    if job is None or not job.alive:
        return
    left = remaining_s(job.started, run.step, run.steps or 0)
    st.caption(f"{seconds_text(time.time() - job.started)} elapsed"
               + (f" · about {seconds_text(left)} left" if left is not None else ""))
    render_stop_button(training_runs.launch_jobs(root), run.name, key=f"tr_stop_{run.name}", what="training run")


def render_run(root: Path, run: TrainRun) -> None:
    """Status, curves (live while it runs), summary, probes and evaluations of one run."""
    st.markdown(f"{_STATE_ICON.get(run.state, '')} **{md_escape(run.name)}** · {md_escape(run.objective or '?')} · "
                f"{md_code(run.path)}")

    job = job_record(root, run.name) if run.state == "new" else None
    starting = job is not None and job.alive  # launched, nothing written yet: follow it until it is

    @st.fragment(run_every=REFRESH_S if run.active or starting else None)
    def _live() -> None:
        current = load_run(run.path)
        _status(current)
        if current.active or starting:
            _steer(root, current)
        _curves(current)
        if (run.active and not current.active) or (starting and not _still_starting(root, current)):
            st.rerun()  # it just finished, started or died: show the summary, probes or the reason

    _live()
    if run.summary:
        summary = {key: run.summary.get(key) for key in SUMMARY_KEYS if key in run.summary}
        st.dataframe(pd.DataFrame([summary]), hide_index=True, key=f"tr_summary_{run.name}")
    probes_tab, evals_tab, config_tab = st.tabs(["Rehearsed vs real", "Checkpoint evaluations", "Config"])
    with probes_tab:
        _probes(run)
    with evals_tab:
        _evals(root, run)
    with config_tab:
        st.json(run.config or {}, expanded=False)
        if run.checkpoints:
            st.caption("Checkpoints: " + ", ".join(f"step-{step:d}" for step in run.checkpoints))


# ------------------------------------------------------------------------------------------ many runs


def render_compare(runs: list[TrainRun]) -> None:
    if len(runs) < 2:
        st.info("Comparing needs two runs or more.", icon=":material/info:")
        return
    names = [run.name for run in runs]
    chosen = st.multiselect("Runs", names, default=names[: min(3, len(names))], key="tr_cmp_runs")
    picked = [run for run in runs if run.name in chosen]
    if not picked:
        return
    frames = {run.name: metrics_frame(run.path) for run in picked}
    available = [metric for metric in COMPARABLE if any(metric in frame for frame in frames.values())]
    if available:
        metric = st.selectbox("Metric", available, key="tr_cmp_metric")
        st.plotly_chart(compare_figure(frames, metric), key="tr_cmp_chart")
    st.dataframe(summary_frame(picked), hide_index=True, key="tr_cmp_table")


def render_sweeps(root: Path) -> None:
    sweeps = list_sweeps(root)
    if not sweeps:
        st.info("No sweeps yet: launch one below or run `worldsmith envace sweep --config FILE`.",
                icon=":material/info:")
        return
    names = [sweep.name for sweep in sweeps]
    index = st.selectbox("Sweep", list(range(len(sweeps))),
                         format_func=lambda i: f"{names[i]} · {'finished' if sweeps[i].finished else 'running'} · "
                                               f"{len(sweeps[i].rows)} trials", key="tr_sweep")
    sweep = sweeps[index]
    table = sweep_table(sweep)
    if not sweep.finished:
        st.caption("Still running: the table shows each trial's run folder so far.")
    elif sweep.best:
        st.success(f"Best ({md_escape(sweep.metric)}, {md_escape(sweep.mode)}): "
                   f"{md_code(sweep.best.get('trial'))} = {md_escape(sweep.best.get(sweep.metric))}",
                   icon=":material/star:")
    failed = table[table["status"].astype(str) == "failed"] if "status" in table else table.iloc[0:0]
    if not failed.empty:
        st.warning(f"{len(failed)} trial(s) failed; the others ran.", icon=":material/warning:")
    st.dataframe(table, hide_index=True, key="tr_sweep_table")
    knobs = [knob for knob in sweep.knobs if knob in table]
    numeric = [column for column in table.columns if column not in knobs and column != "trial"
               and pd.api.types.is_numeric_dtype(table[column]) and not pd.api.types.is_bool_dtype(table[column])]
    if len(knobs) >= 1 and numeric:
        left, middle, right = st.columns(3)
        x = left.selectbox("x", knobs, key="tr_sweep_x")
        y = middle.selectbox("y", knobs, index=min(1, len(knobs) - 1), key="tr_sweep_y")
        default = numeric.index(sweep.metric) if sweep.metric in numeric else 0
        value = right.selectbox("value", numeric, index=default, key="tr_sweep_value")
        st.plotly_chart(sweep_heatmap(table, x, y, value), key="tr_sweep_heatmap")
