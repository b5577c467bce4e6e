"""The Failures tab: where a method goes wrong and why: by action, by the answer source that answered, by rule
(a miss no rule answered counts under its source), by flag (unseen action, novel observation, fallback,
error), by step, by kind of error, and when it drifts. Each breakdown says its biggest cause in one
sentence (`worldsmith.evals.misses`, as `worldsmith eval misses` prints it).

"Wrong" is a record whose chosen metric is below a threshold (by default: not the best score,
e.g. not an exact match). Clustering embeds the wrong predictions with MiniLM, so it runs on a
button press and its result is kept per (run, method, metric, threshold, k) in session_state.
A wrong prediction opened below shows its field-level diff from the real observation (`common.diff_view`) and
takes a tag and a note (`evaluate.failure_tags`), by which the list can be filtered.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import quote, urlencode

import pandas as pd
import streamlit as st

from workbench.common.diff_view import render_text_diff
from workbench.common.links import simulate_query, turn_link, turn_page_link
from workbench.common.paths import page_file
from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape, pretty_text
from workbench.evaluate import charts, tables
from workbench.evaluate.failure_tags import filter_by_tags, render_tag_editor, render_tag_filter, run_tags, with_tags
from workbench.evaluate.records import turn_id
from workbench.worldbook.rule_proposals import render_cluster_proposals
from workbench.worldbook.state import take_notices
from worldsmith.evals import EvalReport, misses
from worldsmith.evals import clusters as error_clusters
from worldsmith.llm import provenance

__all__ = ["BREAKDOWNS", "CLUSTERS", "render_failures"]

T = TypeVar("T")

CLUSTERS = "ev_clusters"  # {key: list[error_clusters.Cluster]}
BREAKDOWNS = "ev_fx_breakdowns"  # {(what, run, methods, metric, threshold, records, sum): result}: the latest only


def _memo(key: tuple[object, ...], compute: Callable[[], T]) -> T:
    """`compute()` once per key (the breakdowns' bootstrap takes a moment; every click reruns the page)."""
    store: dict[tuple[object, ...], Any] = st.session_state.setdefault(BREAKDOWNS, {})
    if key not in store:
        for stale in [k for k in store if k[0] == key[0]]:
            del store[stale]
        store[key] = compute()
    return cast(T, store[key])
_TOP = {"judge_total": 100.0}


def _simulate_url(dataset: str | None, episode_id: str, turn: int, book: str | None, method: str) -> str | None:
    if not dataset or int(turn) < 0:
        return None
    return "simulate?" + urlencode(simulate_query(dataset, str(episode_id), int(turn), book, method=method),
                                   quote_via=quote, safe="")


def _linked(frame: pd.DataFrame, dataset: str | None, book: str | None = None) -> pd.DataFrame:
    shown = frame.drop(columns=[c for c in ("distance",) if c in frame.columns])
    columns = [c for c in ("episode_id", "turn", "tag", "note", "action", "unseen_action", "reference", "prediction",
                           "source", "rules", "route", "error") if c in shown.columns]
    methods = list(shown["method"]) if "method" in shown.columns else [""] * len(shown)
    shown = shown[columns + [c for c in tables.metric_columns() if c in shown.columns]].copy()
    shown.insert(0, "simulate", [_simulate_url(dataset, e, t, book, m) for e, t, m in
                                 zip(shown["episode_id"], shown["turn"], methods, strict=True)])
    shown.insert(0, "open", [turn_link(dataset, turn_id(e, t)) for e, t in zip(shown["episode_id"], shown["turn"],
                                                                                 strict=True)])
    return shown


LINKS = {"open": st.column_config.LinkColumn("traces", display_text="open"),
         "simulate": st.column_config.LinkColumn("simulate", display_text="step it",
                                                 help="Simulate, side by side at this turn, the method's audit open")}


def _render_selected(row: pd.Series, dataset: str | None, book: str | None, metric: str) -> None:
    """One wrong prediction: its action, the real and the predicted observation, what answered it and why it is
    flagged, and the link that opens it in Simulate at its turn with the method's audit open."""
    method, turn = str(row.get("method") or ""), int(row["turn"])
    st.markdown(f"**Turn {turn:d}** of episode {md_code(row['episode_id'])} · {md_code(method)} · "
                f"{md_escape(metric)} {float(row[metric]):.3f}")
    st.code(f"> {row['action']}", language=None, wrap_lines=True)
    real, predicted = st.columns(2)
    real.markdown("**real observation**")
    real.code(pretty_text(row.get("reference")) or "(empty)", language=None, wrap_lines=True)
    predicted.markdown(f"**{md_escape(method)}**")
    predicted.code(pretty_text(row.get("prediction")) or "(empty: the method answered nothing)", language=None,
                   wrap_lines=True)
    render_text_diff(row.get("reference"), row.get("prediction"), label="the prediction against the real observation")
    cause = misses.shared_cause(row.to_frame().T, action_of=tables.action_kind)
    if cause:
        st.caption(f"Why: {md_escape(cause)}")
    if dataset and turn >= 0:
        st.page_link(page_file("simulate"), label=f"Step it in Simulate at turn {turn:d} ({md_escape(method)}'s audit "
                     "open)", icon=":material/model_training:",
                     query_params=simulate_query(dataset, str(row["episode_id"]), turn, book, method=method))
    turn_page_link(dataset, turn_id(row["episode_id"], turn), label="Open this turn in Traces",
                   icon=":material/open_in_new:")


def _render_cluster(index: int, cluster: error_clusters.Cluster, dataset: str | None, book: str | None) -> None:
    actions = ", ".join(f"{md_escape(name)} ×{count:d}" for name, count in cluster.top_actions)
    with st.expander(f"Cluster {index + 1:d} · {cluster.size:d} wrong predictions · {actions}"):
        if cluster.cause:
            st.markdown(f"**Shared cause**: {md_escape(cluster.cause)}")
        if cluster.example.strip():
            st.caption("The most central prediction of the cluster:")
            st.code(pretty_text(cluster.example), language=None, wrap_lines=True)
        else:
            st.caption("The most central prediction of the cluster is empty: the method answered nothing there "
                       "(see what answered it above).")
        st.dataframe(_linked(cluster.records, dataset, book), hide_index=True, key=f"ev_fx_cluster_{index}",
                     column_config=LINKS)
        render_cluster_proposals(book, error_clusters.cluster_rules(cluster.records), key=f"ev_fx_prop_{index}",
                                 actions=[name for name, _ in cluster.top_actions],
                                 reason=_no_rule_reason(cluster))


def _no_rule_reason(cluster: error_clusters.Cluster) -> str:
    """Why no rule is behind a cluster, and what would fix it, for the 'nothing to propose' line."""
    records = cluster.records
    unseen = misses.unseen_actions(records, action_of=tables.action_kind)
    sources = misses.answered_by(records).value_counts()
    source = str(sources.index[0]) if not sources.empty else misses.UNKNOWN
    if unseen:
        return (f"{', '.join(unseen[:4])} never appear{'s' if len(unseen) == 1 else ''} in the book's construction "
                "data, so no rule could be learned: build the book from logs that call "
                f"{'it' if len(unseen) == 1 else 'them'}, or write a rule on the Worldbook page")
    return (f"these predictions were answered by {source}, not by a rule, and the book has no rule for "
            f"{', '.join(name for name, _ in cluster.top_actions) or 'these actions'}: write one on the Worldbook "
            "page, or rebuild with more of their turns")


GROUP_COLUMNS = {
    "error_rate": st.column_config.NumberColumn("error rate", format="percent"),
    "error_rate_low": st.column_config.NumberColumn("low", format="percent", help="95% interval of the error rate"),
    "error_rate_high": st.column_config.NumberColumn("high", format="percent", help="95% interval of the error rate"),
    "share_of_misses": st.column_config.NumberColumn("share of misses", format="percent"),
    "share_low": st.column_config.NumberColumn("share low", format="percent"),
    "share_high": st.column_config.NumberColumn("share high", format="percent"),
    "trajectories": st.column_config.NumberColumn("episodes", help="episodes resampled for the intervals"),
}
PAIR_COLUMNS = {
    "error_rate_a": st.column_config.NumberColumn("error rate (this)", format="percent"),
    "error_rate_b": st.column_config.NumberColumn("error rate (other)", format="percent"),
    "mean_diff": st.column_config.NumberColumn("difference", format="percent"),
    "low": st.column_config.NumberColumn("low", format="percent", help="95% interval of the paired difference"),
    "high": st.column_config.NumberColumn("high", format="percent", help="95% interval of the paired difference"),
    "trajectories": st.column_config.NumberColumn("episodes"),
}


def _render_paired(run: str, scored: pd.DataFrame, method: str, others: list[str], metric: str,
                   threshold: float) -> None:
    """This method's error rate minus another's per row, on the same turns resampled together."""
    with st.expander(f"Paired: {md_escape(method)} against another method, row by row",
                     icon=":material/compare_arrows:"):
        other = st.selectbox("Compare with", others, key="ev_fx_pair_with")
        result = _memo(("paired", run, method, str(other), metric, threshold, len(scored),
                        float(scored[metric].sum())),
                       lambda: misses.paired_miss_differences(scored, method, str(other), metric, threshold,
                                                              resamples=misses.DEFAULT_MISS_RESAMPLES,
                                                              action_of=tables.action_kind))
        st.caption(f"{md_code(method)} minus {md_code(str(other))} in error rate on the {result['turns']:d} turns both "
                   f"scored; a row holds the turns {md_code(method)}'s records put in it. Resampled by episode, the "
                   "same turns of both methods together; \"differs\" when the 95% interval excludes 0.")
        for by in misses.PAIRED_GROUPINGS:
            rows = pd.DataFrame(result["by"][by])
            if rows.empty:
                continue
            rows["differs"] = [misses.differs(row) for row in result["by"][by]]
            st.markdown(f"**By {md_escape(by)}**")
            st.dataframe(rows, hide_index=True, key=f"ev_fx_pair_{by}", column_config=PAIR_COLUMNS)


def _source(report: EvalReport | None, mine: pd.DataFrame, method: str, metric: str
            ) -> provenance.NumberProvenance | None:
    """What produced the tab's counts: the report's record of `method`, with n the scored predictions it pools (those
    of every protocol in the run); None before the run has a report."""
    if report is None:
        return None
    protocols = list(dict.fromkeys(mine["protocol"].dropna())) if "protocol" in mine.columns else []
    return report.provenance_of(method).model_copy(update={
        "n": int(mine[metric].notna().sum()), "unit": "scored predictions", "episodes": int(mine["episode_id"].nunique()),
        "protocol": ", ".join(tables.PROTOCOL_LABELS.get(p, p) for p in protocols) or None})


def _render_wrong(run: str, wrong: pd.DataFrame, dataset: str | None, book: str | None, metric: str,
                  root: str) -> None:
    """The wrong predictions (with their tags, filterable by tag); the one chosen shows why it missed, its diff and
    its tag editor."""
    with st.expander(f"The {len(wrong):d} wrong predictions", icon=":material/list:", expanded=True):
        st.caption("Click a row (or choose it below) to see why it missed and open it in Simulate at its turn; "
                   "'step it' opens Simulate directly.")
        tags = run_tags(root, run)
        tagged = with_tags(run, wrong, tags)
        listed = filter_by_tags(tagged, render_tag_filter(tagged)).reset_index(drop=True)
        if len(listed) < len(tagged):
            st.caption(f"{len(listed):d} of {len(tagged):d} wrong predictions carry the chosen tags.")
        table = st.dataframe(_linked(listed, dataset, book), hide_index=True, key="ev_fx_wrong",
                             column_config=LINKS, on_select="rerun", selection_mode="single-row")
        picked = list(getattr(getattr(table, "selection", None), "rows", None) or [])
        labels: dict[int, str] = {i: f"{row.episode_id} · turn {int(row.turn):d} · {str(row.action)[:80]}"
                                  for i, row in enumerate(listed.itertuples())}
        first: int | None = int(picked[0]) if picked else None
        chosen = st.selectbox("Wrong prediction", list(labels), format_func=lambda i: labels[int(i)],
                              index=first, key=f"ev_fx_open_{picked[0] if picked else ''}",
                              placeholder="choose one to see why it missed")
        if chosen is not None and int(chosen) < len(listed):
            with st.container(border=True):
                _render_selected(listed.iloc[int(chosen)], dataset, book, metric)
                render_tag_editor(root, run, listed.iloc[int(chosen)], tags)


def render_failures(run: str, report: EvalReport | None, records: pd.DataFrame, dataset: str | None,
                    root: str) -> None:
    """The Failures tab for one run (`root`: the workspace, where its failure tags are kept)."""
    scored = records[records["turn"] >= 0] if "turn" in records.columns else records.iloc[0:0]
    metrics = [m for m in tables.metric_columns() if m in scored.columns and scored[m].notna().any()]
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
    headline = misses.miss_headline(mine, metric, threshold, action_of=tables.action_kind)
    if headline:
        st.markdown(f"**{md_escape(headline[0].upper() + headline[1:])}.**")
    provenance_caption([_source(report, mine, method, metric)])

    unseen = misses.unseen_actions(mine, action_of=tables.action_kind)
    if unseen:
        st.warning(f"{len(unseen):d} action{'s never appear' if len(unseen) != 1 else ' never appears'} in the "
                   "construction data: "
                   f"{md_escape(', '.join(unseen[:12]))}{' …' if len(unseen) > 12 else ''}. Nothing taught the "
                   "book their answers.", icon=":material/new_releases:")
    has_source = "source" in mine.columns and mine["source"].notna().any()
    if not has_source:
        st.caption("This run was recorded before records named their answer source: grouped by route instead.")
    groups = _memo(("groups", run, method, metric, threshold, len(mine), float(mine[metric].sum())),
                   lambda: {by: tables.error_groups(mine, metric, threshold, by,
                                                    resamples=misses.DEFAULT_MISS_RESAMPLES)
                            for by in misses.GROUPINGS})
    causes = [f"- **{md_escape(label)}**: {md_escape(cause)}" for by, label in
              (("source", "By source"), ("flag", "By flag"), ("action", "By action"), ("rule", "By rule"))
              if (cause := misses.biggest_cause(groups[by], by, unseen))]
    if causes:
        st.markdown("Biggest causes of the misses\n\n" + "\n".join(causes))
    by_action, by_source = st.columns(2)
    with by_action:
        st.markdown("**Errors by action**")
        st.dataframe(groups["action"], hide_index=True, key="ev_fx_by_action", column_config=GROUP_COLUMNS)
    with by_source:
        st.markdown("**Errors by source** (what answered: the answer source, else the route)")
        st.dataframe(groups["source"], hide_index=True, key="ev_fx_by_source", column_config=GROUP_COLUMNS)
    by_rule, by_flag = st.columns(2)
    with by_rule:
        st.markdown("**Errors by rule** (rules the prediction used; else the source that answered)")
        st.dataframe(groups["rule"], hide_index=True, key="ev_fx_by_rule", column_config=GROUP_COLUMNS)
    with by_flag:
        st.markdown("**Errors by flag** (unseen action, novel observation, fallback, error)")
        st.dataframe(groups["flag"], hide_index=True, key="ev_fx_by_flag", column_config=GROUP_COLUMNS)
    st.caption(f"Low – high: the 95% interval of the error rate and of the share of misses, from "
               f"{misses.DEFAULT_MISS_RESAMPLES:,} resamples of the episodes (a row's turns of one episode stay "
               "together).")
    others = [m for m in sorted(scored["method"].dropna().unique()) if m != method]
    if others:
        _render_paired(run, scored, method, others, metric, threshold)
    book = report.config.get("book") if report is not None else None
    if not wrong.empty:
        _render_wrong(run, wrong, dataset, book, metric, root)

    table = tables.heatmap_frame(mine, metric)
    if not table.empty:
        st.plotly_chart(charts.heatmap(table, metric, zmax=top), key="ev_fx_heat")

    st.subheader("Clusters of wrong predictions", anchor=False)
    k = st.slider("Clusters (k)", min_value=2, max_value=8, value=4, key="ev_fx_k")
    key = f"{run}|{method}|{metric}|{threshold}|{k}"
    store: dict[str, list[error_clusters.Cluster]] = st.session_state.setdefault(CLUSTERS, {})
    if st.button("Cluster the wrong predictions", key="ev_fx_cluster", icon=":material/bubble_chart:",
                 disabled=wrong.empty):
        with st.spinner("Embedding the predictions (MiniLM) and clustering"):
            store.clear()
            store[key] = error_clusters.cluster_errors(wrong, k)
    clusters = store.get(key)
    if clusters is not None:
        st.caption(f"{len(clusters)} clusters of {len(wrong)} wrong predictions (MiniLM embeddings, k-means, seed 0)")
        for message in take_notices():  # a proposal applied under a cluster
            st.success(message, icon=":material/check_circle:")
        for index, cluster in enumerate(clusters):
            _render_cluster(index, cluster, dataset, book)

    divergence = tables.divergence_frame(report, records)
    if not divergence.empty:
        st.subheader("First divergence", anchor=False)
        drifted = divergence["step"].notna().sum()
        st.caption(f"{drifted:d} of {len(divergence)} trajectories diverge (× marks the first divergent step).")
        st.plotly_chart(charts.divergence_timeline(divergence), key="ev_fx_divergence")
