"""The report of a build: statuses, held-out validation per action, cross-fitting, stage timings, model stages."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.paths import page_file
from workbench.common.provenance import provenance_caption
from workbench.common.tables import flat_frame
from workbench.common.text import md_code, md_escape
from worldsmith.llm import provenance
from worldsmith.worldbook import LeakageReport


def validation_frame(report: dict[str, Any]) -> pd.DataFrame:
    return pd.DataFrame([{"action": action, "turns": row["turns"], "coverage": row["covered_rate"],
                          "conditions checked": row["verified_rate"], "exact match": row["exact_rate"]}
                         for action, row in report["per_action"].items()])


def leakage_frame(leakage: LeakageReport) -> pd.DataFrame:
    """Which held-out trajectories also stand in the construction episodes, and why: a row per trajectory
    (`worldbook.build.leakage_check`'s `leaked_episodes`, every leaked episode)."""
    return pd.DataFrame([{"episode": episode, "why": "; ".join(reasons)}
                         for episode, reasons in leakage.leaked_episodes.items()], columns=["episode", "why"])


def build_split(outcome: dict[str, Any]) -> str | None:
    """The split the book was built from: "all" for the whole dataset, None where an older outcome did not say."""
    return (outcome["split"] or "all") if "split" in outcome else None


def build_provenance(outcome: dict[str, Any], *, method: str, split: str | None, n: int | None,
                     model: str | None = "none") -> provenance.NumberProvenance:
    """What produced one block of a build report: `method` on the dataset the book was built from (an outcome stored
    by older code did not record it: "unknown"), `split`, `n` turns, run = the book's name@version."""
    return provenance.NumberProvenance(method=method, model=model, dataset=outcome.get("dataset"), split=split, n=n,
                                       unit="turns", run=f"{outcome['book']}@{outcome['version']}")


def _validation(title: str, report: dict[str, Any], source: provenance.NumberProvenance) -> None:
    totals, common = report["totals"], report["common_actions"]
    st.markdown(f"**{md_escape(title)}**")
    columns = st.columns(4)
    columns[0].metric("Turns", md_escape(totals["turns"]))
    columns[1].metric("Coverage", f"{totals['coverage']:.1%}", help="a supported rule applied")
    columns[2].metric("Conditions checked", f"{totals['coverage_verified']:.1%}",
                      help="the rule's conditions were verified on the tracked state (not assumed)")
    columns[3].metric("Exact match", f"{totals['exact_match']:.1%}")
    actions = ", ".join(md_escape(action) for action in common["actions"])
    st.caption(f"Common actions ({actions}): coverage {common['coverage']:.1%}, "
               f"exact match {common['exact_match']:.1%}")
    st.dataframe(validation_frame(report), hide_index=True,
                 column_config={c: st.column_config.ProgressColumn(c, min_value=0.0, max_value=1.0, format="percent")
                                for c in ("coverage", "conditions checked", "exact match")})
    provenance_caption([source])


def render_leakage(outcome: dict[str, Any]) -> None:
    """The builder's leakage check of the held-out split; an outcome stored by older code reads too."""
    stored = outcome.get("leakage")
    leakage = LeakageReport.read(stored) if stored else None
    st.caption(f"Held-out split {md_code(outcome.get('validation_split'))}; leakage check "
               f"{'passed' if leakage is not None and leakage.ok else 'FAILED'}")
    if leakage is not None and not leakage.ok:
        st.warning(f"{len(leakage.leaked_episodes)} held-out trajectories also stand in the construction episodes: "
                   "the held-out numbers below overstate fidelity. Evaluate with `--drop-leaked` or split again.",
                   icon=":material/warning:")
        st.dataframe(leakage_frame(leakage), hide_index=True)


def demotion_frame(outcome: dict[str, Any]) -> pd.DataFrame:
    """The rules reviewed as supported that did not hold out (`worldbook.holdout`), one row each."""
    def held(row: dict[str, Any]) -> str:
        answered = row.get("held_out_answered")
        return "not measured" if answered is None else f"{row.get('held_out_exact')}/{answered}"

    return pd.DataFrame([{"rule": row["rule"], "kind": row["kind"], "families": row["families"],
                          "held-out exact": held(row), "why": "; ".join(row["reasons"])}
                         for row in outcome.get("demoted") or []],
                        columns=["rule", "kind", "families", "held-out exact", "why"])


def _demotions(outcome: dict[str, Any]) -> None:
    demoted = outcome.get("demoted") or []
    if demoted:
        st.markdown(f"**{len(demoted)} rules reviewed as supported did not hold out: tentative**")
        st.caption("Supported needs support from at least 3 trajectory families, no value in the template that one "
                   "family alone showed, and at least 90% exact on the held-out turns the rule answered in the "
                   "route table's cross-fitting.")
        st.dataframe(demotion_frame(outcome), hide_index=True)
        provenance_caption([build_provenance(
            outcome, method="route table cross-fitting (the book's harness route stage)", split=build_split(outcome),
            n=None, model=outcome.get("stages", {}).get("routes", {}).get("model"))])
    elif outcome.get("held_out_measured") is False:
        st.caption("Held-out exactness per rule was not measured (no route table): supported rules passed the "
                   "family and literal tests only.")


def render_build_report(outcome: dict[str, Any]) -> None:
    st.success(f"Saved {md_code(outcome['book'])} version {md_code(outcome['version'])} "
               f"(parent {md_code(outcome['parent'])}): {md_escape(outcome['rules'])} rules from "
               f"{md_escape(outcome['episodes'])} trajectories.", icon=":material/check_circle:")
    st.page_link(page_file("worldbook"), label="Open it on the Worldbook page", icon=":material/menu_book:")
    for warning in outcome.get("warnings") or []:
        st.warning(f"Built with a warning: {md_escape(warning)}", icon=":material/warning:")
    statuses = sorted(outcome["statuses"].items())
    if statuses:  # the rule counts by status, as figures rather than a JSON tree
        for column, (status, count) in zip(st.columns(len(statuses)), statuses, strict=True):
            column.metric(f"{md_escape(status)} rules", md_escape(count))
    _demotions(outcome)
    if outcome.get("validation"):
        render_leakage(outcome)
        _validation("Replay on held-out trajectories", outcome["validation"], build_provenance(
            outcome, method="worldbook rule replay", split=outcome.get("validation_split"),
            n=outcome["validation"]["totals"]["turns"]))
    if outcome.get("cross_fit"):
        crossed = outcome["cross_fit"]
        _validation(f"Validation by cross-fitting, {crossed['folds']} folds by trajectory family (pooled)",
                    crossed["pooled"], build_provenance(
                        outcome, method=f"worldbook rule replay, {crossed['folds']}-fold cross-fitting by family",
                        split=build_split(outcome), n=crossed["pooled"]["totals"]["turns"]))
        st.caption("These folds validate the book. The route table measures which source to trust with its own "
                   "folds (the Route-table folds setting), shown on the Worldbook page's Routes tab.")
    if not outcome.get("validation") and not outcome.get("cross_fit"):
        st.info("Not validated: choose a held-out split or cross-fitting folds.", icon=":material/info:")
    with st.expander("Stages"):
        st.dataframe(pd.DataFrame([{"stage": stage, "seconds": seconds,
                                    "cached": outcome["stages"].get(stage, {}).get("cached")}
                                   for stage, seconds in outcome["timings_s"].items()]), hide_index=True)
        for stage in ("rules", "notes"):
            model = outcome["stages"].get(stage, {}).get("model")
            if model:
                st.markdown(f"**Model-backed {md_escape(stage)} stage**: {md_escape(model)}")
            compared = outcome["stages"].get(stage, {}).get("compared_with_deterministic")
            if compared:
                st.markdown(f"**{md_escape(stage)}: model against deterministic**")
                st.dataframe(flat_frame(compared), hide_index=True)
