"""Rendering of import reports: totals, per-file outcomes, rejects, quarantine download."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.data import display_path
from workbench.common.text import md_code, md_escape


def normalize_report(report: dict[str, Any]) -> dict[str, Any]:
    """One shape for `ImportReport.summary()` and the stored report JSON (`Dataset.reports()`)."""
    files = list(report.get("files") or [])
    out = dict(report)
    for total in ("episodes", "turns", "dialogue_only", "rejected", "duplicates"):
        if out.get(total) is None:
            out[total] = sum(int(f.get(total) or 0) for f in files)
    out["files"] = files
    out["rejects"] = list(report.get("rejects") or [])
    out["quarantine"] = report.get("quarantine") or report.get("quarantine_path")
    out["report"] = report.get("report") or report.get("report_path")
    return out


def report_headline(report: dict[str, Any]) -> str:
    r = normalize_report(report)
    verb = "Imported" if r.get("committed") else "Nothing committed:"
    text = f"{verb} {md_escape(r['episodes'])} episodes, {md_escape(r['turns'])} turns into {md_code(r.get('dataset'))}"
    extras = []
    if r["dialogue_only"]:
        extras.append(f"{md_escape(r['dialogue_only'])} of them dialogue only (no tool call)")
    if r["rejected"]:
        extras.append(f"{md_escape(r['rejected'])} rejected")
    if r["duplicates"]:
        extras.append(f"{md_escape(r['duplicates'])} duplicates skipped")
    empty = sum(int(f.get("empty") or 0) for f in r["files"])
    if empty:
        extras.append(f"{md_escape(empty)} empty records (no turn, no message), not stored")
    renamed = sum(int(f.get("renamed") or 0) for f in r["files"])
    if renamed:
        extras.append(f"{md_escape(renamed)} ids suffixed on a collision")
    if extras:
        text += " (" + ", ".join(extras) + ")"
    redaction = r.get("redaction")
    if redaction:
        counts = ", ".join(f"{md_escape(c['replaced'])} {md_escape(kind)}" for kind, c in redaction["kinds"].items())
        text += f"; redacted: {counts} occurrences replaced"
    if not r.get("committed") and r.get("strict") and r["rejected"]:
        text += " — strict mode discards the import when any record is rejected"
    return text


_VARYING = re.compile(r"'[^']*'|\"[^\"]*\"|\d+")


def reason_counts(rejects: list[dict]) -> list[tuple[str, int]]:
    """The rejects' reasons grouped by their wording (quoted ids and numbers set aside), each shown by its first
    example, the commonest first: the table cuts long reasons, this list does not."""
    groups: dict[str, list[str]] = {}
    for item in rejects:
        reason = str(item.get("reason") or "(no reason given)")
        groups.setdefault(_VARYING.sub("…", reason), []).append(reason)
    return sorted(((examples[0], len(examples)) for examples in groups.values()), key=lambda pair: -pair[1])


def render_import_report(report: dict[str, Any], *, root: str | None = None, key: str = "report") -> None:
    """Draw one import report (from ImportReport.summary() or a stored report)."""
    r = normalize_report(report)
    committed = bool(r.get("committed"))
    headline = report_headline(r)
    if committed and not r["rejected"]:
        st.success(headline, icon=":material/check_circle:")
    elif committed:
        st.warning(headline, icon=":material/warning:")
    else:
        st.error(headline, icon=":material/error:")

    cols = st.columns(6)
    cols[0].metric("Episodes", md_escape(r["episodes"]))
    cols[1].metric("Turns", md_escape(r["turns"]))
    cols[2].metric("Dialogue only", md_escape(r["dialogue_only"]),
                   help="Episodes without a tool call (messages only): stored and browsable, left out of "
                        "building and evaluation.")
    cols[3].metric("Rejected", md_escape(r["rejected"]))
    cols[4].metric("Duplicates", md_escape(r["duplicates"]))
    cols[5].metric("Committed", "yes" if committed else "no")

    if r["files"]:
        st.markdown("**Files**")
        files = pd.DataFrame([
            {
                "file": display_path(f.get("path"), root),
                "format": f.get("format"),
                "episodes": f.get("episodes", 0),
                "turns": f.get("turns", 0),
                "dialogue only": f.get("dialogue_only", 0),
                "rejected": f.get("rejected", 0),
                "duplicates": f.get("duplicates", 0),
                "empty (not stored)": f.get("empty", 0),
                "environment (derived)": _environment_cell(f),
                "error": f.get("error") or "",
            }
            for f in r["files"]
        ])
        st.dataframe(files, hide_index=True, width="stretch", key=f"{key}_files",
                     column_config={"environment (derived)": st.column_config.TextColumn(width="large")})
        reasons = [f"- {md_code(display_path(f.get('path'), root))}: {md_escape(f['env_reason'])}"
                   for f in r["files"] if f.get("env_reason")]
        if reasons:
            st.markdown("**Environments** (files that name none and declare no tool schemas join the environment of "
                        "the workspace whose tools and system prompt they match):\n\n" + "\n".join(reasons))

    if r["rejects"]:
        shown = len(r["rejects"])
        label = f"**Rejects** ({shown} shown" + (", more in the quarantine file)" if r.get("rejects_truncated") else ")")
        st.markdown(label)
        why = [f"- {count:d} × {md_escape(reason)}" for reason, count in reason_counts(r["rejects"])[:8]]
        st.markdown("Why, in full (the commonest first; ids and numbers vary within a line):\n\n" + "\n".join(why))
        rejects = pd.DataFrame([
            {
                "source": display_path(item.get("source"), root),
                "line": item.get("line"),
                "pointer": item.get("pointer") or "",
                "reason": item.get("reason") or "",
            }
            for item in r["rejects"]
        ])
        st.dataframe(
            rejects, hide_index=True, width="stretch", key=f"{key}_rejects",
            column_config={"line": st.column_config.NumberColumn("line", format="%d"),
                           "reason": st.column_config.TextColumn("reason", width="large")},
        )

    quarantine = r.get("quarantine")
    if quarantine and Path(quarantine).is_file():
        path = Path(quarantine)
        st.download_button(
            "Download quarantine file",
            data=lambda: path.read_bytes(),
            file_name=path.name,
            mime="application/jsonl",
            icon=":material/download:",
            key=f"{key}_quarantine",
            help="The rejected records verbatim, one JSON object per line, with the reason: fix and re-import.",
        )
    captions = []
    if r.get("report"):
        captions.append(f"report: {md_code(display_path(r['report'], root))}")
    if r.get("seconds") is not None:
        captions.append(f"{float(r['seconds']):.2f} s")
    if r.get("ingest_id"):
        captions.append(f"ingest {md_code(r['ingest_id'])}")
    if captions:
        st.caption(" · ".join(captions))


_DECISIONS = {"joined": "joined", "new": "new", "ambiguous": "ambiguous: choose below"}


def _environment_cell(file: dict[str, Any]) -> str:
    """The environment a file's episodes got, and how: `toolshop (joined)`, `tools-a-b (from declared tools)`."""
    env = file.get("derived_env")
    if not env:
        return ""
    decision = file.get("env_decision")
    return f"{env} ({_DECISIONS.get(decision, decision)})" if decision else f"{env} (from {file.get('derived_from') or 'tools'})"


def ambiguous_files(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The files of a committed import that match several environments: the user chooses which one each joins."""
    r = normalize_report(report)
    return [f for f in r["files"] if f.get("env_decision") == "ambiguous" and r.get("committed")]


def history_frame(reports: list[dict[str, Any]], *, root: str | None = None) -> pd.DataFrame:
    """One row per past ingest (newest first)."""
    rows = []
    for raw in reports:
        r = normalize_report(raw)
        rows.append({
            "ingest": r.get("ingest_id"),
            "committed": bool(r.get("committed")),
            "files": ", ".join(display_path(f.get("path"), root) for f in r["files"]),
            "episodes": r["episodes"],
            "turns": r["turns"],
            "dialogue only": r["dialogue_only"],
            "rejected": r["rejected"],
            "duplicates": r["duplicates"],
            "strict": bool(r.get("strict")),
            "seconds": round(float(r.get("seconds") or 0.0), 2),
        })
    return pd.DataFrame(rows)


def render_import_history(reports: list[dict[str, Any]], *, root: str | None = None, key: str = "history") -> None:
    """Past import reports: a table, and the full report of one chosen ingest."""
    if not reports:
        st.caption("No import reports for this dataset.")
        return
    st.dataframe(history_frame(reports, root=root), hide_index=True, width="stretch", key=f"{key}_table")
    ids = [r.get("ingest_id") for r in reports]
    chosen = st.selectbox("Show the full report of", ids, index=None, key=f"{key}_pick",
                          placeholder="Choose an ingest")
    if chosen:
        render_import_report(reports[ids.index(chosen)], root=root, key=f"{key}_{chosen}")
