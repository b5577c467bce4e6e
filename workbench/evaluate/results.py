"""The Results tab of the Evaluate page: leaderboard with intervals, forest plot, judge bars, fidelity@t, cost.

Everything shown with an interval takes it from the run's report (`EvalReport`) (the library's paired bootstrap over
trajectories); the judge's per-dimension intervals, which the report does not carry, are
computed from the records and labelled as such.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common.provenance import provenance_caption
from workbench.common.tables import flat_frame
from workbench.common.text import md_code, md_escape
from workbench.evaluate import charts, tables
from worldsmith.evals import EvalReport, RunFolder, ScopeBlock
from worldsmith.evals import judge as llm_judge
from worldsmith.llm import provenance

__all__ = ["render_results", "scope_options", "sources"]

POOLED = "all environments"


def scope_options(report: EvalReport) -> list[str]:
    """Pooled, each environment of `per_env`, then seen/unseen tasks when the report splits them."""
    options = [POOLED, *[f"env: {env}" for env in sorted(report.per_env)]]
    options += [f"{split} tasks" for split in ("seen", "unseen") if report.scope(split=split).methods]
    return options


def _scope(report: EvalReport, choice: str) -> ScopeBlock:
    if choice.startswith("env: "):
        return report.scope(env_id=choice.removeprefix("env: "))
    if choice.endswith(" tasks"):
        return report.scope(split=choice.removesuffix(" tasks"))
    return report.scope()


def _bootstrap(report: EvalReport) -> str:
    """How the intervals were made, as the report records it (older reports: in their configuration)."""
    settings, config = report.bootstrap, report.config
    resamples = settings.resamples or config.get("resamples") or config.get("bootstrap_resamples")
    confidence = settings.confidence or config.get("confidence") or 0.95
    what = f"{resamples:,} resamples" if isinstance(resamples, int) else "bootstrap"
    return f"{confidence:.0%} paired bootstrap intervals over trajectories ({what})"


def sources(report: EvalReport, block: ScopeBlock, choice: str = POOLED) -> list[provenance.NumberProvenance]:
    """What produced each method's numbers in the scope shown: the report's record per method, with the scope's own n
    (records and episodes of its first metric, as the table's n) and a scope other than the pool named beside the
    split."""
    records = []
    for method, cells in block.methods.items():
        record = report.provenance_of(method)
        cell = next(iter(cells.values()), None)
        if cell is not None and cell.n is not None:
            record = record.model_copy(update={"n": cell.n, "episodes": cell.trajectories})
        if choice != POOLED:
            record = record.model_copy(update={"split": f"{record.fields()['split']}, {choice}"})
        records.append(record)
    return records


def _knowable(report: EvalReport) -> None:
    """Exact match on all turns beside the knowable ones, and the novel share (unknown for older runs)."""
    if report.protocol not in ("next-obs", "drift", "live"):
        return
    frame = tables.knowable_frame(report)
    st.subheader("Knowable turns", anchor=False)
    if frame.empty:
        st.caption("This run has no per-turn novelty flags (it was made before them): which turns were knowable "
                   "is unknown.")
        return
    st.dataframe(frame, hide_index=True, key="ev_knowable")
    provenance_caption(sources(report, report.scope()))
    st.caption("A turn is novel when its observation shows a value (number, id, quoted string, JSON leaf, named "
               "entity) seen neither earlier in its episode nor in the book's evidence (an entity, a number or a "
               "name actions take as an argument, counts as seen in the evidence only where every episode that made "
               "the same call was shown it): no simulator could know it. Knowable = the other turns; n = records "
               "scored. Teacher forced the simulator is given the real prefix (earlier observations too); open loop "
               "only the task, the opening observation and the episode's own actions, so a value shown only by an "
               "earlier real observation is knowable teacher forced but novel open loop.")


def _protocol_view(report: EvalReport) -> EvalReport:
    """A run of several protocols: the side-by-side table, and the protocol the rest of the tab shows (the primary,
    open loop, unless another is chosen)."""
    names = report.protocol_names()
    if len(names) <= 1:
        return report
    st.subheader("Open loop and teacher forced", anchor=False)
    st.dataframe(tables.protocols_frame(report), hide_index=True, key="ev_protocols")
    provenance_caption(report.provenance_of(method, protocol) for protocol in names for method in report.counts)
    st.caption("Open loop (drift, live) the model acts on its own answers, as it does under an agent; teacher forced "
               "(next-obs) it reads the real prefix, which an agent never supplies. Open loop is the headline.")
    chosen = st.radio("Protocol", names, horizontal=True, key="ev_protocol",
                      format_func=lambda name: md_escape(tables.PROTOCOL_LABELS.get(name, name)))
    return report.for_protocol(chosen or names[0])


def render_results(run: Path, report: EvalReport, records: pd.DataFrame) -> None:
    """The whole Results tab for one run (a run of several protocols: the chosen protocol's, open loop first)."""
    judge = report.judge
    st.caption(f"protocol{'s' if len(report.protocol_names()) > 1 else ''} "
               f"{md_code(', '.join(report.protocol_names()) or report.protocol)} · fingerprint {md_code(report.fingerprint[:16])}"
               f" · judge {md_code(judge if judge else 'none')} · created {md_code(report.created)}")
    dropped = tables.dropped_frame(report)
    if not dropped.empty:
        st.warning(f"{len(dropped)} leaked episodes were left out of this run (drop leaked): the book was built from "
                   "them or from copies of their trajectories.", icon=":material/filter_alt:")
        with st.expander("Dropped episodes"):
            st.dataframe(dropped, hide_index=True, key="ev_dropped")
    folds = tables.folds_frame(report)
    if not folds.empty:
        st.caption(f"Cross-fitted: {len(folds)} folds by trajectory family, each evaluated with a book built from the "
                   "other folds; the records are pooled.")
        with st.expander("Folds"):
            st.dataframe(folds, hide_index=True, key="ev_folds")
    report = _protocol_view(report)
    if "protocol" in records.columns and len(report.protocol_names()) > 1:
        records = records[records["protocol"] == report.protocol]
    choice = st.radio("Scope", scope_options(report), horizontal=True, key="ev_scope", format_func=md_escape)
    block = _scope(report, choice)
    methods = block.methods
    st.subheader("Leaderboard", anchor=False)
    table = tables.leaderboard_table(methods)
    if table.empty or len(table.columns) <= 2:
        st.info("This run has no scored methods in this scope.", icon=":material/info:")
    else:
        errors = report.errors
        if choice == POOLED and any(errors.values()):
            table.insert(2, "errors", table["method"].map(lambda m: errors.get(m, 0)))
        st.dataframe(tables.with_models(table, report), hide_index=True, key="ev_leaderboard")
        small = tables.small_sample_caption(methods)
        if small:
            st.warning(md_escape(small), icon=":material/scatter_plot:")
        st.caption(f"mean [low, high]: {_bootstrap(report)}; n = records scored"
                   + ("; errors = predictions that raised (scored as an empty observation)" if "errors" in table else "")
                   + ".")
        provenance_caption(sources(report, block, choice))
    _knowable(report)
    long = tables.leaderboard_frame(methods)
    metrics = list(dict.fromkeys(long["metric"])) if not long.empty else []
    if metrics:
        metric = st.selectbox("Metric", metrics, key="ev_metric")
        left, right = st.columns(2)
        left.plotly_chart(charts.metric_bars(long, metric), key="ev_bars")
        pairs = tables.pairs_frame(block.pairs, metric)
        if pairs.empty:
            right.caption("No paired differences for this metric (one method, or none scored on the same records).")
        else:
            right.plotly_chart(charts.forest_plot(pairs, metric), key="ev_forest")
            with st.expander("Paired differences (table)"):
                st.dataframe(pairs, hide_index=True, key="ev_pairs")
        provenance_caption(sources(report, block, choice))

    judged = llm_judge.judge_frame(records) if not records.empty else pd.DataFrame()
    if not judged.empty:
        st.subheader("Judge dimensions", anchor=False)
        st.plotly_chart(charts.judge_bars(judged), key="ev_judge")
        provenance_caption(sources(report, report.scope()))

    fidelity = tables.fidelity_frame(report)
    if not fidelity.empty:
        st.subheader("Fidelity over steps", anchor=False)
        st.plotly_chart(charts.fidelity_curves(fidelity), key="ev_fidelity")
        provenance_caption(sources(report, report.scope()))

    w2r = tables.w2r_frame(report)
    if not w2r.empty:
        st.subheader("World to real", anchor=False)
        st.dataframe(w2r, hide_index=True, key="ev_w2r")
        st.caption("real: success of the policy in the real environment; w2r: success when its simulated action "
                   "sequence is replayed in the real environment; consistency = w2r / real.")
        provenance_caption(report.provenance_of(method) for method in report.counts)

    cost = tables.cost_frame(report)
    if not cost.empty:
        st.subheader("Cost (mean per record)", anchor=False)
        st.dataframe(cost, hide_index=True, key="ev_cost")
        provenance_caption(report.provenance_of(method) for method in report.cost)

    with st.expander("Configuration, seeds and leakage check"):
        written = report.to_json()
        st.dataframe(flat_frame({"config": written.get("config"), "seeds": written.get("seeds"),
                                 "leakage": written.get("leakage")}), hide_index=True, key="ev_config")
    markdown = RunFolder(run).markdown_path
    if markdown.is_file():
        st.download_button("Download report.md", markdown.read_bytes(), file_name=f"{run.name}.md",
                           mime="text/markdown", key="ev_report_md")
