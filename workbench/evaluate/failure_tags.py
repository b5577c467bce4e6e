"""Failure tags on the Failures tab: a label and a note per wrong prediction, kept in the workspace
(`worldsmith.workspace.FailureTags`, the same store `worldsmith eval tag` / `eval tags` write and read), shown
as a column of the wrong predictions, filterable by label, and exported as JSON lines.

Labels and notes are untrusted text: they reach the page in dataframes, widgets' values and st.code only, and in
Markdown through `md_code`.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pandas as pd
import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.util import BadInputError
from worldsmith.workspace import FailureKey, FailureTag, FailureTags

__all__ = ["FILTER_KEY", "UNTAGGED", "filter_by_tags", "render_tag_editor", "render_tag_filter", "run_tags",
           "with_tags"]

FILTER_KEY = "ev_fx_tag_filter"
UNTAGGED = "(untagged)"
_NOTICE = "ev_tag_notice"  # the notice of the last save (Markdown), shown after its rerun


def run_tags(root: str | Path, run: str) -> dict[FailureKey, FailureTag]:
    """The run's tags by failure (read on every rerun: the CLI may have written some meanwhile)."""
    return {tag.key: tag for tag in FailureTags(root).list(run=run)}


def _key(run: str, row: pd.Series) -> FailureKey:
    return FailureKey(run, str(row["episode_id"]), int(row["turn"]), str(row.get("method") or ""))


def with_tags(run: str, frame: pd.DataFrame, tags: dict[FailureKey, FailureTag]) -> pd.DataFrame:
    """`frame` (records) with `tag` and `note` columns (empty where untagged)."""
    keys = [_key(run, row) for _, row in frame.iterrows()]
    return frame.assign(tag=[tags[k].tag if k in tags else "" for k in keys],
                        note=[tags[k].note if k in tags else "" for k in keys])


def render_tag_filter(frame: pd.DataFrame) -> list[str]:
    """The labels to keep (none chosen: every row), chosen among those `frame`'s `tag` column holds."""
    labels = sorted({label for label in frame["tag"] if label})
    if not labels:
        return []
    options = [*labels, UNTAGGED]
    chosen = [label for label in st.session_state.get(FILTER_KEY, []) if label in options]
    st.session_state[FILTER_KEY] = chosen
    return list(st.multiselect("Show only failures tagged", options, key=FILTER_KEY,
                               placeholder="every failure, tagged or not"))


def filter_by_tags(frame: pd.DataFrame, labels: list[str]) -> pd.DataFrame:
    if not labels:
        return frame
    wanted = set(labels)
    keep = [(label or UNTAGGED) in wanted for label in frame["tag"]]
    return frame[keep]


def _export(root: str | Path, run: str) -> bytes:
    return b"".join(orjson.dumps(tag.to_json()) + b"\n" for tag in FailureTags(root).list(run=run))


def render_tag_editor(root: str | Path, run: str, row: pd.Series, tags: dict[FailureKey, FailureTag]) -> None:
    """Label the chosen failure and note why (saved in the workspace), or take its tag away."""
    key = _key(run, row)
    current = tags.get(key)
    suffix = f"{key.episode_id}_{key.turn}_{key.method}"
    if (saved := st.session_state.pop(_NOTICE, None)) is not None:
        st.success(saved, icon=":material/sell:")
    with st.form(f"ev_tag_form_{suffix}", border=False):
        label = st.text_input("Tag", value=current.tag if current else "", key=f"ev_tag_label_{suffix}",
                              placeholder="a short label, e.g. wrong amount", max_chars=64)
        note = st.text_area("Note", value=current.note if current else "", key=f"ev_tag_note_{suffix}",
                            placeholder="why it failed", height=80)
        save, remove = st.columns(2)
        saving = save.form_submit_button("Save tag", icon=":material/sell:")
        removing = remove.form_submit_button("Remove tag", disabled=current is None)
    store = FailureTags(root)
    if saving:
        try:
            tagged = store.set(key, tag=label, note=note)
        except BadInputError as error:
            st.error(f"Not saved: {md_escape(error)}", icon=":material/error:")
            return
        st.session_state[_NOTICE] = f"Tagged {md_code(tagged.tag)}: {md_code(key.episode_id)} turn {key.turn:d}"
        st.rerun()
    if removing:
        store.remove(key)
        st.session_state[_NOTICE] = f"Tag removed: {md_code(key.episode_id)} turn {key.turn:d}"
        st.rerun()
    if tags:
        st.download_button("Export this run's tags (JSON lines)", _export(root, run), file_name=f"{run}-tags.jsonl",
                           mime="application/jsonl", key="ev_tag_export", icon=":material/download:")
