"""The Consistency tab of the Evaluate page: the open-loop consistency checker on a chosen book, per tool.

A check runs here, in the page (a few seconds: no model is called unless the method needs one, and those are not
offered), with a progress bar per session; its report is stored in `<workspace>/runs/consistency/` by the library
(`ConsistencyReport.write`, atomic) and read back from there, so earlier checks stay listed. Beside each tool's
violations the tab shows the same method's exact match on that tool in the evaluation run chosen above (the
fidelity), when that run evaluated the method.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape
from workbench.evaluate.tables import action_kind
from worldsmith.evals import consistency
from worldsmith.util import WorldsmithError, plain_run_name

__all__ = ["fidelity_by_tool", "list_reports", "render_consistency", "report_path", "run_check", "tool_frame"]

FOLDER = ("runs", "consistency")
LABELS = {"repeated_reads": "repeated reads", "answers_about_id": "answers about the id",
          "stable_existence": "stable existence", "spelling": "spelling", "write_then_read": "write then read"}


def reports_dir(root: Path) -> Path:
    return Path(root).joinpath(*FOLDER)


def report_path(root: Path, book: str, version: str, method: str, seed: int) -> Path:
    """Where a check of `book@version` by `method` with `seed` is stored (one file each; a rerun replaces it)."""
    name = plain_run_name(f"{book}.{method}.seed{seed}", ValueError)
    return reports_dir(root) / f"{name}.{version}.json"


def list_reports(root: Path) -> list[tuple[Path, consistency.ConsistencyReport | None, str]]:
    """(path, report or None, error) for every stored check, newest first."""
    folder = reports_dir(root)
    paths = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True) if folder.is_dir() else []
    out: list[tuple[Path, consistency.ConsistencyReport | None, str]] = []
    for path in paths:
        try:
            out.append((path, consistency.read_report(path), ""))
        except WorldsmithError as error:  # one unreadable file is listed as such, the others still show
            out.append((path, None, str(error)))
    return out


def run_check(root: Path, book: str, method: str, sessions: int, seed: int, progress=None) -> Path:
    """Check the head version of `book` and store the report; its path."""
    from worldsmith.worldbook import WorldbookStore

    store = WorldbookStore.of_workspace(root)
    version = store.head(book)
    config = consistency.ConsistencyConfig(method=method, sessions=sessions, seed=seed)
    report = consistency.check_consistency(store.load(book, version), config, book_version=version,
                                           progress=progress)
    return report.save(report_path(root, book, version, method, seed))


def fidelity_by_tool(records: pd.DataFrame, method: str) -> dict[str, float]:
    """Mean exact match per tool (the action's name) of `method`'s records in an evaluation run."""
    if records.empty or not {"method", "action", "exact_match"} <= set(records.columns):
        return {}
    mine = records[(records["method"] == method) & records["exact_match"].notna()]
    if mine.empty:
        return {}
    return {str(k): float(v) for k, v in mine.groupby(mine["action"].map(action_kind))["exact_match"].mean().items()}


def tool_frame(report: consistency.ConsistencyReport, fidelity: dict[str, float] | None = None) -> pd.DataFrame:
    """One row per tool: its role, each invariant's violations/checks, and the fidelity when given."""
    roles = {tool["name"]: tool["role"] for tool in report.plan.get("tools", [])}
    rows = []
    for row in report.rows():
        tool = row["tool"]
        out = {"tool": tool, "role": roles.get(tool, "")}
        out.update({LABELS[name]: row[name] for name in consistency.INVARIANTS})
        if fidelity is not None:
            out["exact match (eval run)"] = fidelity.get(tool)
        rows.append(out)
    return pd.DataFrame(rows)


def _invariant_frame(report: consistency.ConsistencyReport) -> pd.DataFrame:
    return pd.DataFrame([{"invariant": LABELS[name], "what it asks": consistency.INVARIANTS[name],
                          "checks": tally.checks, "violations": tally.violations, "rate": tally.rate}
                         for name, tally in report.invariants.items()])


def _examples_frame(report: consistency.ConsistencyReport) -> pd.DataFrame:
    return pd.DataFrame([{"invariant": LABELS.get(e.invariant, e.invariant), "tool": e.tool, "session": e.session,
                          "step": e.step, "why": e.note, "calls": "\n".join(e.calls), "answers": "\n".join(e.answers)}
                         for e in report.examples])


def _form(root: Path, books: list[str]) -> None:
    from worldsmith.sim import world_model_names, world_model_spec

    methods = [name for name in world_model_names() if world_model_spec(name).llm != "required"]
    with st.form("cons_form"):
        left, middle, right, last = st.columns([2, 2, 1, 1])
        book = left.selectbox("Worldbook", books, key="cons_book")
        method = middle.selectbox("Method", methods, index=methods.index("harness") if "harness" in methods else 0,
                                  key="cons_method")
        sessions = right.number_input("Sessions", min_value=1, max_value=500, value=20, key="cons_sessions")
        seed = last.number_input("Seed", min_value=0, value=0, key="cons_seed")
        submitted = st.form_submit_button("Check consistency", icon=":material/rule:")
    if submitted and book:
        bar = st.progress(0.0, text="probing…")
        path = run_check(root, book, method, int(sessions), int(seed),
                         progress=lambda done, total: bar.progress(done / total, text=f"session {done}/{total}"))
        bar.empty()
        st.session_state["cons_shown"] = str(path)


def render_consistency(root: Path, books: list[str], records: pd.DataFrame | None = None,
                       run_name: str | None = None) -> None:
    """The tab: the form, the stored checks, the chosen one's per-invariant and per-tool tables and examples.
    `records`: the evaluation run chosen above (its per-tool exact match is shown beside)."""
    st.markdown("Open-loop probes of what every stateful API obeys: a read repeated answers the same, a read "
                "answers about the id asked, existence is stable between writes, every spelling of a call answers "
                "the same, and a write and the next read agree where the recordings do. Probes are made from the "
                "book's own tools and recordings, with ids it saw and ids it never saw. Also `worldsmith "
                "consistency --book BOOK`.")
    if not books:
        st.info("No worldbooks in this workspace yet: build one first.", icon=":material/info:")
        return
    _form(root, books)
    stored = list_reports(root)
    if not stored:
        st.info("No consistency checks yet: run one above.", icon=":material/info:")
        return
    by_path = {str(path): (report, error) for path, report, error in stored}
    shown = st.session_state.get("cons_shown")
    options = list(by_path)
    index = options.index(shown) if shown in by_path else 0

    def label(path: str) -> str:
        report, error = by_path[path]
        if report is None:
            return f"{Path(path).name} · unreadable"
        return f"{report.book}@{report.book_version or '?'} · {report.method} · seed {report.seed} · " \
               f"{report.violations}/{report.checks} violations"

    chosen = st.selectbox("Check", options, index=index, format_func=label, key="cons_report")
    report, error = by_path[chosen]
    if report is None:
        st.error(md_escape(error), icon=":material/error:")
        return
    st.caption(f"{md_code(report.book)} version {md_code(report.book_version or '?')} · method "
               f"{md_code(report.method)} · {report.sessions:d} sessions × {report.steps:d} steps · seed "
               f"{report.seed:d} · {report.predictions:d} predictions")
    st.dataframe(_invariant_frame(report), hide_index=True, key="cons_invariants",
                 column_config={"rate": st.column_config.NumberColumn(format="percent")})
    provenance_caption([report.source()])
    fidelity = fidelity_by_tool(records, report.method) if records is not None else {}
    st.subheader("Per tool", anchor=False)
    if fidelity:
        st.caption(f"violations/checks per invariant; exact match of {md_code(report.method)} in evaluation run "
                   f"{md_code(run_name or '?')} beside.")
    st.dataframe(tool_frame(report, fidelity if fidelity else None), hide_index=True, key="cons_tools")
    provenance_caption([report.source()])
    st.subheader("Violations", anchor=False)
    if report.examples:
        st.dataframe(_examples_frame(report), hide_index=True, key="cons_examples")
    else:
        st.success("No violation found.", icon=":material/check_circle:")
