"""The Compare tab: two runs' reports side by side (same methods and metrics) and how their configurations differ."""

from __future__ import annotations

from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code
from workbench.evaluate import tables
from worldsmith.evals import EvalReport

__all__ = ["config_differences", "render_compare"]


def config_differences(a: dict[str, Any] | None, b: dict[str, Any] | None) -> pd.DataFrame:
    """Top-level configuration fields whose values differ between two runs (shown as JSON text)."""
    a, b = a or {}, b or {}
    rows = [{"field": key, "run A": _text(a.get(key)), "run B": _text(b.get(key))}
            for key in sorted(set(a) | set(b)) if a.get(key) != b.get(key)]
    return pd.DataFrame(rows, columns=["field", "run A", "run B"])


def _text(value: Any) -> str:
    import json

    return "" if value is None else value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def render_compare(run_a: str, report_a: EvalReport, reports: dict[str, EvalReport]) -> None:
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
               "own (the runs may hold different records, so no paired interval is claimed).")
    st.dataframe(frame, hide_index=True, key="ev_cmp_table",
                 column_config={"B − A": st.column_config.NumberColumn(format="%+.3f")})
    provenance_caption(report.provenance_of(method) for report in (report_a, report_b) for method in report.counts)
    differences = config_differences(report_a.config, report_b.config)
    if report_a.fingerprint == report_b.fingerprint:
        st.caption("Both runs have the same configuration fingerprint.")
    elif not differences.empty:
        st.markdown("**Configuration differences**")
        st.dataframe(differences, hide_index=True, key="ev_cmp_config")
