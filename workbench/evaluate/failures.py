"""The Failures tab: where a method goes wrong and why: by action, by the answer source that answered, by rule
(a miss no rule answered counts under its source), by flag (unseen action, novel observation, fallback,
error), by step, by kind of error, and when it drifts. Each breakdown says its biggest cause in one
sentence (`worldsmith.evals.misses`, as `worldsmith eval misses` prints it).

"Wrong" is a record whose chosen metric is below a threshold (by default: not the best score,
e.g. not an exact match). Clustering embeds the wrong predictions with MiniLM, so it runs on a
button press and its result is kept per (run, method, metric, threshold, k) in session_state.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.links import turn_link
from workbench.common.text import md_code, md_escape
from workbench.evaluate import charts, tables
from workbench.evaluate.clusters import Cluster, cluster_errors, cluster_rules
from workbench.evaluate.records import turn_id
from workbench.worldbook.rule_proposals import render_cluster_proposals
from workbench.worldbook.state import take_notices
from worldsmith.evals import misses
from worldsmith.evals.report_model import EvalReport

__all__ = ["CLUSTERS", "render_failures"]

CLUSTERS = "ev_clusters"  # {key: list[Cluster]}
_TOP = {"judge_total": 100.0}


def _linked(frame: pd.DataFrame, dataset: str | None) -> pd.DataFrame:
    shown = frame.drop(columns=[c for c in ("distance",) if c in frame.columns])
    columns = [c for c in ("episode_id", "turn", "action", "unseen_action", "reference", "prediction", "source",
                           "rules", "route", "error") if c in shown.columns]
    shown = shown[columns + [c for c in tables.METRIC_COLUMNS if c in shown.columns]].copy()
    shown.insert(0, "open", [turn_link(dataset, turn_id(e, t)) for e, t in zip(shown["episode_id"], shown["turn"],
                                                                                 strict=True)])
    return shown


def _render_cluster(index: int, cluster: Cluster, dataset: str | None, book: str | None) -> None:
    actions = ", ".join(f"{md_escape(name)} ×{count:d}" for name, count in cluster.top_actions)
    with st.expander(f"Cluster {index + 1:d} · {cluster.size:d} wrong predictions · {actions}"):
        st.caption("The most central prediction of the cluster:")
        st.code(cluster.example, language=None, wrap_lines=True)
        st.dataframe(_linked(cluster.records, dataset), hide_index=True, key=f"ev_fx_cluster_{index}",
                     column_config={"open": st.column_config.LinkColumn("traces", display_text="open")})
        render_cluster_proposals(book, cluster_rules(cluster.records), key=f"ev_fx_prop_{index}",
                                 actions=[name for name, _ in cluster.top_actions])


def render_failures(run: str, report: EvalReport | None, records: pd.DataFrame, dataset: str | None) -> None:
    """The Failures tab for one run."""
    scored = records[records["turn"] >= 0] if "turn" in records.columns else records.iloc[0:0]
    metrics = [m for m in tables.METRIC_COLUMNS if m in scored.columns and scored[m].notna().any()]
    if scored.empty or not metrics:
        per_episode = not records.empty and "turn" in records.columns and (records["turn"] < 0).all()
        st.info("This view reads per-turn predictions; a W2R run records one row per episode (see Results)."
                if per_episode else "This run has no scored predictions yet.", icon=":material/info:")
        return
    left, middle, right = st.columns(3)
    method = left.selectbox("Method", sorted(scored["method"].dropna().unique()), key="ev_fx_method")
    metric = middle.selectbox("Metric", metrics, key="ev_fx_metric")
    top = _TOP.get(metric, 1.0)
    threshold = right.number_input(f"Wrong when {md_escape(metric)} is below", min_value=0.0, max_value=top, value=top,
                                   key=f"ev_fx_threshold_{metric}")
    mine = scored[scored["method"] == method]
    wrong = mine[tables.wrong_mask(mine, metric, threshold)]
    st.caption(f"{len(wrong)} of {int(mine[metric].notna().sum())} scored predictions of {md_code(method)} are wrong.")

    unseen = misses.unseen_actions(mine, action_of=tables.action_kind)
    if unseen:
        st.warning(f"{len(unseen):d} action{'s never appear' if len(unseen) != 1 else ' never appears'} in the "
                   "construction data: "
                   f"{md_escape(', '.join(unseen[:12]))}{' …' if len(unseen) > 12 else ''}. Nothing taught the "
                   "book their answers.", icon=":material/new_releases:")
    has_source = "source" in mine.columns and mine["source"].notna().any()
    if not has_source:
        st.caption("This run was recorded before records named their answer source: grouped by route instead.")
    groups = {by: tables.error_groups(mine, metric, threshold, by) for by in misses.GROUPINGS}
    causes = [f"**{label}**: {md_escape(cause)}" for by, label in
              (("source", "By source"), ("flag", "By flag"), ("action", "By action"), ("rule", "By rule"))
              if (cause := misses.biggest_cause(groups[by], by, unseen))]
    if causes:
        st.markdown("Biggest causes of the misses\n\n" + "\n".join("- " + line for line in causes))
    by_action, by_source = st.columns(2)
    with by_action:
        st.markdown("**Errors by action**")
        st.dataframe(groups["action"], hide_index=True, key="ev_fx_by_action")
    with by_source:
        st.markdown("**Errors by source** (what answered: the answer source, else the route)")
        st.dataframe(groups["source"], hide_index=True, key="ev_fx_by_source")
    by_rule, by_flag = st.columns(2)
    with by_rule:
        st.markdown("**Errors by rule** (rules the prediction used; else the source that answered)")
        st.dataframe(groups["rule"], hide_index=True, key="ev_fx_by_rule")
    with by_flag:
        st.markdown("**Errors by flag** (unseen action, novel observation, fallback, error)")
        st.dataframe(groups["flag"], hide_index=True, key="ev_fx_by_flag")
    if not wrong.empty:
        with st.expander(f"The {len(wrong):d} wrong predictions", icon=":material/list:"):
            st.dataframe(_linked(wrong, dataset), hide_index=True, key="ev_fx_wrong",
                         column_config={"open": st.column_config.LinkColumn("traces", display_text="open")})

    table = tables.heatmap_frame(mine, metric)
    if not table.empty:
        st.plotly_chart(charts.heatmap(table, metric, zmax=top), key="ev_fx_heat")

    st.subheader("Clusters of wrong predictions", anchor=False)
    k = st.slider("Clusters (k)", min_value=2, max_value=8, value=4, key="ev_fx_k")
    key = f"{run}|{method}|{metric}|{threshold}|{k}"
    store: dict[str, list[Cluster]] = st.session_state.setdefault(CLUSTERS, {})
    if st.button("Cluster the wrong predictions", key="ev_fx_cluster", icon=":material/bubble_chart:",
                 disabled=wrong.empty):
        with st.spinner("Embedding the predictions (MiniLM) and clustering"):
            store.clear()
            store[key] = cluster_errors(wrong, k)
    clusters = store.get(key)
    if clusters is not None:
        st.caption(f"{len(clusters)} clusters of {len(wrong)} wrong predictions (MiniLM embeddings, k-means, seed 0)")
        for message in take_notices():  # a proposal applied under a cluster
            st.success(message, icon=":material/check_circle:")
        for index, cluster in enumerate(clusters):
            _render_cluster(index, cluster, dataset, report.config.get("book") if report is not None else None)

    divergence = tables.divergence_frame(report, records)
    if not divergence.empty:
        st.subheader("First divergence", anchor=False)
        drifted = divergence["step"].notna().sum()
        st.caption(f"{drifted:d} of {len(divergence)} trajectories diverge (× marks the first divergent step).")
        st.plotly_chart(charts.divergence_timeline(divergence), key="ev_fx_divergence")
