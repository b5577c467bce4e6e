"""The schemas of a worldbook as tables: actions (aliases, arguments, pattern, examples), state paths
(filterable by namespace), observation contracts, invariants and what ends an episode."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.text import md_escape
from workbench.worldbook.rule_edits import condition_text
from worldsmith.worldbook import NAMESPACES, StatePath, Worldbook

__all__ = ["actions_frame", "contracts_frame", "invariants_frame", "render_schema_browser", "state_frame",
           "termination_frame"]


def actions_frame(book: Worldbook) -> pd.DataFrame:
    return pd.DataFrame([{"action": a.name, "aliases": ", ".join(a.aliases),
                          "arguments": ", ".join(f"{x.name}: {x.type}{'' if x.required else ' (optional)'}"
                                                 for x in a.arguments),
                          "pattern": a.pattern or "", "examples": " | ".join(a.examples),
                          "description": a.description} for a in book.action_schema.actions],
                        columns=["action", "aliases", "arguments", "pattern", "examples", "description"])


def _namespace(path: StatePath) -> str:
    return path.path.split(".", 1)[0]


def state_frame(book: Worldbook, namespaces: tuple[str, ...] = ()) -> pd.DataFrame:
    """State paths, only those in `namespaces` when any are given."""
    return pd.DataFrame([{"path": p.path, "namespace": _namespace(p), "type": p.type, "mutable": p.mutable,
                          "description": p.description} for p in book.state_schema.paths
                         if not namespaces or _namespace(p) in namespaces],
                        columns=["path", "namespace", "type", "mutable", "description"])


def contracts_frame(book: Worldbook) -> pd.DataFrame:
    return pd.DataFrame([{"action": c.action, "template": c.template, "required fields": ", ".join(c.required_fields),
                          "examples": " | ".join(c.examples)} for c in book.contracts],
                        columns=["action", "template", "required fields", "examples"])


def invariants_frame(book: Worldbook) -> pd.DataFrame:
    return pd.DataFrame([{"id": i.id, "description": i.description,
                          "conditions": " and ".join(condition_text(c) for c in i.conditions)}
                         for i in book.invariants], columns=["id", "description", "conditions"])


def termination_frame(book: Worldbook) -> pd.DataFrame:
    features = book.termination.features if book.termination else []
    return pd.DataFrame([{"kind": f.kind, "value": f.value, "precision": f.precision, "recall": f.recall,
                          "done turns": f.support, "turns": ", ".join(f.supporting[:5])} for f in features],
                        columns=["kind", "value", "precision", "recall", "done turns", "turns"])


def _table(title: str, frame: pd.DataFrame, empty: str) -> None:
    st.markdown(f"**{md_escape(title)}** ({len(frame)})")
    if frame.empty:
        st.caption(empty)
    else:
        st.dataframe(frame, hide_index=True)


def render_schema_browser(book: Worldbook) -> None:
    _table("Actions", actions_frame(book), "No actions in the action schema.")
    namespaces = st.multiselect("Namespaces", NAMESPACES, key="wb_s_namespaces")
    _table("State paths", state_frame(book, tuple(namespaces)), "No state paths (in these namespaces).")
    _table("Observation contracts", contracts_frame(book), "No observation contracts.")
    _table("Invariants", invariants_frame(book), "No invariants.")
    _table("Episode ends on (any of)", termination_frame(book),
           "No termination learned (no recorded done turns, or no feature precise enough).")
