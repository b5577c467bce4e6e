"""The Worldbook page's session state: which version is shown, notices, and patches made on it.

The page keeps showing the version it opened until the person asks for the current one, so an
edit is always a patch on the version the person saw: if someone else changed the same rule or
note meanwhile, the store refuses it (PatchConflictError) instead of overwriting their change.
A browser refresh starts a new session, which opens HEAD: what was saved is what is shown.
"""

from __future__ import annotations

import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.worldbook import Patch, PatchConflictError, PatchOp, WorldbookError, WorldbookStore

__all__ = ["NOTICES", "SHOWN", "notice", "show_version", "shown_version", "submit_patch", "take_notices"]

SHOWN = "wb_shown"  # {worldbook name: version shown}
NOTICES = "wb_notices"
AUTHOR = "workbench"


def shown_version(store: WorldbookStore, name: str) -> str:
    """The version of `name` this session shows (HEAD on first sight, or when the shown one is gone)."""
    shown: dict[str, str] = st.session_state.setdefault(SHOWN, {})
    version = shown.get(name)
    if version is not None:
        try:
            store.info(name, version)
        except WorldbookError:
            version = None
    if version is None:
        version = shown[name] = store.head(name)
    return version


def show_version(name: str, version: str) -> None:
    """Show `version` of `name` from the next run on (safe inside widget callbacks)."""
    st.session_state.setdefault(SHOWN, {})[name] = version


def notice(message: str) -> None:
    st.session_state.setdefault(NOTICES, []).append(message)


def take_notices() -> list[str]:
    return list(st.session_state.pop(NOTICES, None) or [])


def submit_patch(store: WorldbookStore, name: str, base: str, ops: list[PatchOp], message: str,
                 *, done: str) -> None:
    """Apply one patch made against `base`; on success show the new version and rerun, else show why.

    `done` is the notice shown after the rerun, as Markdown with its values escaped (the new version's id is
    appended).
    """
    try:
        new = store.patch(name, Patch(base=base, ops=ops, author=AUTHOR, message=message))
    except PatchConflictError as error:
        st.error(f"Not saved: {md_escape(error)}", icon=":material/sync_problem:")
        return
    except WorldbookError as error:
        st.error(f"Not saved: {md_escape(error)}", icon=":material/error:")
        return
    show_version(name, new.version)
    notice(done + f": version {md_code(new.version)}")
    st.rerun()
