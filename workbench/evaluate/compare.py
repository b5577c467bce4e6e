"""The Compare tab: two runs' reports side by side (same methods and metrics), how their configurations differ, and
the two runs turn by turn (`EvalRunStore.compare`): the turns both scored, where they differ first, with the paired
interval of B − A, and a chosen turn's predictions diffed (`common.diff_view`).

Predictions and actions are untrusted text: dataframes, the diff view and st.code only.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.diff_view import render_text_diff
from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape, pretty_text
from workbench.evaluate import tables
from worldsmith.evals import EvalReport, EvalRunStore, small_sample_note
from worldsmith.util import BadInputError

COMPARISONS = "ev_cmp_turns"  # {(root, run A, run B, metric, stamps): comparison}: the latest only
DIFFERING_KEY = "ev_cmp_differing"

__all__ = ["config_differences", "render_compare", "render_turn_comparison"]


def config_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> pd.DataFrame:
    """Top-level configuration fields whose values differ between two runs (shown as JSON text)."""
    a, b = a or {}, b or {}
    rows = [{"field": key, "run A": _text(a.get(key)), "run B": _text(b.get(key))}
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]
    return pd.DataFrame(rows, columns=["field", "run A", "run B"])


def _text(value: Any) -> str:
    import json

    return "" if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def render_compare(run_a: str, report_a: EvalReport, reports: dict[str, EvalReport], root: str) -> None:
    """Choose run B among the complete runs; show A and B per method and metric, and B − A."""
    others = [name for name in reports if name != run_a]
    if not others:
        st.info("Comparing needs a second complete run.", icon=":material/info:")
        return
    run_b = st.selectbox("Compare with", others, index=None, key="ev_cmp_run", placeholder="another run")
    if run_b is None:
        return
    report_b = reports[run_b]
    frame = tables.compare_runs_frame(report_a, report_b)
    st.caption(f"run A = {md_code(run_a)}, run B = {md_code(run_b)}. B − A compares the pooled means; each run's interval is its "
               "own (the runs may hold different records): the paired interval, on the turns both scored, is below.")
    st.dataframe(frame, hide_index=True, key="ev_cmp_table",
                 column_config={"B − A": st.column_config.NumberColumn(format="%+.3f")})
    provenance_caption(report.provenance_of(method) for report in (report_a, report_b) for method in report.counts)
    shared = set(frame["metric"]) if "metric" in frame.columns else set()
    render_turn_comparison(root, run_a, str(run_b), [m for m in tables.metric_columns() if m in shared])
    differences = config_differences(report_a.config, report_b.config)
    if report_a.fingerprint == report_b.fingerprint:
        st.caption("Both runs have the same configuration fingerprint.")
    elif not differences.empty:
        st.markdown("**Configuration differences**")
        st.dataframe(differences, hide_index=True, key="ev_cmp_config")


def _comparison(root: str, run_a: str, run_b: str, metric: str) -> Any:
    store = EvalRunStore(root)
    stamps = tuple(path.stat().st_mtime_ns for name in (run_a, run_b) for path in store.run(name).files())
    key = (root, run_a, run_b, metric, stamps)
    memo: dict[tuple[Any, ...], Any] = st.session_state.setdefault(COMPARISONS, {})
    if key not in memo:
        memo.clear()
        memo[key] = store.compare(run_a, run_b, metric=metric)
    return memo[key]


def _turns_frame(turns: list[Any]) -> pd.DataFrame:
    return pd.DataFrame([{"episode_id": t.episode_id, "turn": t.turn, "method": t.method, "protocol": t.protocol,
                          "differs": t.differs, "A": t.score_a, "B": t.score_b, "B − A": t.change,
                          "action": t.action, "prediction A": t.prediction_a, "prediction B": t.prediction_b}
                         for t in turns],
                        columns=["episode_id", "turn", "method", "protocol", "differs", "A", "B", "B − A", "action",
                                 "prediction A", "prediction B"])


def render_turn_comparison(root: str, run_a: str, run_b: str, metrics: list[str]) -> None:
    """Run B against run A turn by turn: the paired interval, the turns (differing ones first, or only those), and
    a chosen turn's two predictions diffed."""
    st.markdown("**Turn by turn**")
    if not metrics:
        st.caption("The runs share no per-turn metric.")
        return
    metric = st.selectbox("Metric", metrics, key="ev_cmp_metric")
    try:
        comparison = _comparison(root, run_a, run_b, str(metric))
    except BadInputError as error:
        st.info(md_escape(error), icon=":material/info:")
        return
    interval = comparison.interval
    if interval is None:
        st.info("The runs have no turn in common (the same protocol, method, episode and turn): nothing to pair.",
                icon=":material/info:")
        return
    note = small_sample_note(interval.trajectories)
    st.markdown(f"{md_escape(metric)}, B − A: **{interval.mean:+.3f}** \\[{interval.low:+.3f}, {interval.high:+.3f}\\] "
                f"on the {interval.n:d} turns both runs scored, over {interval.trajectories:d} episodes (95% paired "
                f"bootstrap: both runs' turns of an episode resampled together)" + (f" · {md_escape(note)}" if note else ""))
    st.caption(f"{comparison.differing:d} of {len(comparison.turns):d} paired turns differ (prediction or score); "
               f"{comparison.only_a:d} turns only in {md_code(run_a)}, {comparison.only_b:d} only in {md_code(run_b)}.")
    only = st.toggle("Only where they differ", value=True, key=DIFFERING_KEY)
    turns = [t for t in comparison.turns if t.differs] if only else list(comparison.turns)
    if not turns:
        st.caption("The runs predicted the same on every paired turn.")
        return
    table = st.dataframe(_turns_frame(turns), hide_index=True, key="ev_cmp_turns_table", on_select="rerun",
                         selection_mode="single-row",
                         column_config={"B − A": st.column_config.NumberColumn(format="%+.3f")})
    picked = list(getattr(getattr(table, "selection", None), "rows", None) or [])
    labels = {i: f"{t.episode_id} · turn {t.turn:d} · {t.method} · {t.action[:60]}" for i, t in enumerate(turns)}
    chosen = st.selectbox("Paired turn", list(labels), format_func=lambda i: labels[int(i)],
                          index=int(picked[0]) if picked else None, key=f"ev_cmp_open_{picked[0] if picked else ''}",
                          placeholder="choose one to see how the predictions differ")
    if chosen is None:
        return
    turn = turns[int(chosen)]
    with st.container(border=True, key="ev-cmp-turn"):
        st.code(f"> {turn.action}", language=None, wrap_lines=True)
        real, first, second = st.columns(3)
        real.markdown("**real observation**")
        real.code(pretty_text(turn.reference) or "(empty)", language=None, wrap_lines=True)
        first.markdown(f"**{md_escape(run_a)}** (A)")
        first.code(pretty_text(turn.prediction_a) or "(empty)", language=None, wrap_lines=True)
        second.markdown(f"**{md_escape(run_b)}** (B)")
        second.code(pretty_text(turn.prediction_b) or "(empty)", language=None, wrap_lines=True)
        render_text_diff(turn.prediction_a, turn.prediction_b, label="B's prediction against A's")
        render_text_diff(turn.reference, turn.prediction_b, label="B's prediction against the real observation")
