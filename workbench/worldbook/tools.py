"""Worldbook page tools: search the knowledge (lexical, dense or both), export and import Trace2Env packages."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from workbench.common.links import turn_query
from workbench.common.paths import page_file
from workbench.common.text import md_code, md_escape
from worldsmith.worldbook import (
    SEARCH_KINDS,
    DenseUnavailableError,
    Worldbook,
    WorldbookError,
    WorldbookIndex,
    WorldbookStore,
    index_folder,
    interop,
)


@st.cache_resource(show_spinner=False, max_entries=8)
def _index(root: str, name: str, version: str, dense: bool) -> WorldbookIndex:
    store = WorldbookStore(Path(root))
    return WorldbookIndex.open(store.load(name, version), index_folder(store.root, name, version), dense=dense)


def render_search(store: WorldbookStore, name: str, version: str, book: Worldbook, dataset: str | None) -> None:
    left, middle, right = st.columns([3, 1, 2])
    query = left.text_input("Search rules, notes, demonstrations and evidence", key="wb_search_query",
                            placeholder="e.g. pick up an object")
    mode = middle.selectbox("Mode", ["hybrid", "lexical", "dense"], key="wb_search_mode")
    kinds = right.multiselect("Kinds", list(SEARCH_KINDS), key="wb_search_kinds")
    if not query.strip():
        return
    try:
        with st.spinner("Indexing this version (once)…"):
            index = _index(str(store.root), name, version, mode != "lexical")
        hits = index.search(query, 20, kinds=kinds or None, mode=mode)
    except DenseUnavailableError as error:
        st.error(f"Dense search is unavailable here: {md_escape(error)}. Lexical search still works.",
                 icon=":material/error:")
        return
    if not hits:
        st.info("Nothing matches.", icon=":material/search_off:")
        return
    st.dataframe(pd.DataFrame([{"kind": h.kind, "id": h.id, "score": round(h.score, 4), "text": h.text[:300]}
                               for h in hits]), hide_index=True)
    evidence = [h for h in hits if h.kind == "evidence"][:5]
    for hit in evidence:
        st.page_link(page_file("traces"), label=f"Open turn {md_escape(hit.id)}", icon=":material/open_in_new:",
                     query_params=turn_query(dataset, hit.id))


def render_package(store: WorldbookStore, name: str, version: str) -> None:
    st.markdown("**Export** this version as a Trace2Env package (a folder of JSON/JSONL files)")
    left, right = st.columns([3, 1])
    target = left.text_input("Folder to write", key="wb_export_dir", placeholder="/path/to/package")
    overwrite = right.checkbox("Replace a non-empty folder", key="wb_export_overwrite")
    if st.button("Export", key="wb_export", icon=":material/upload:") and target.strip():
        try:
            out = interop.export_version(store, name, target.strip(), version=version, overwrite=overwrite)
        except (WorldbookError, OSError) as error:
            st.error(md_escape(error), icon=":material/error:")
        else:
            st.success(f"Wrote the package to {md_code(out)}.", icon=":material/check_circle:")
    st.divider()
    st.markdown("**Import** a Trace2Env package as a new version (of its own name, or of the name given)")
    left, right = st.columns([3, 1])
    source = left.text_input("Package folder", key="wb_import_dir", placeholder="/path/to/package")
    new_name = right.text_input("Name (optional)", key="wb_import_name")
    if st.button("Import", key="wb_import", icon=":material/download:") and source.strip():
        try:
            book, info, ignored = interop.import_into_store(store, source.strip(), name=new_name.strip() or None,
                                                    author="workbench")
        except (WorldbookError, OSError) as error:
            st.error(md_escape(error), icon=":material/error:")
        else:
            st.success(f"Imported {md_code(book.name)} as version {md_code(info.version)} (parent "
                       f"{md_code(info.parent)}), {len(book.rules)} rules.", icon=":material/check_circle:")
            if ignored:
                st.caption("Ignored fields: " + "; ".join(md_escape(field) for field in ignored[:20]))
