"""The curation loop on the Worldbook page: choose a held-out set once, then see what each edit did to it.

The set (a dataset's split) is part of the page's kept state (`HELDOUT_STATE`, `workbench.common.page_state`): in the
session and in the URL (`heldout_dataset`, `heldout_split`), so Back, a reload, the sidebar or a shared link keep it. It is checked for leakage against the version shown with the
rule `worldsmith eval` uses. Every edit makes a version whose parent is the version edited, so the
panel shows the paired held-out delta of the version shown against its parent (overall and for the
edited action), and the turns it fixed or broke, each a link into Traces with what the edit changed in its
prediction (`common.diff_view`: the field, not three whole observations). Right after a save the delta is scrolled
into view: the edit is made below it. Predictions are cached per version on disk (`evals.heldout`), so after an
edit only the new version is scored.
"""

from __future__ import annotations

import streamlit as st

from workbench.common.diff_view import render_text_diff
from workbench.common.links import turn_query
from workbench.common.page_state import PageState
from workbench.common.paths import page_file
from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape
from worldsmith.evals import HeldOut, HeldOutDelta, LeakageError
from worldsmith.evals import heldout as heldout_scores
from worldsmith.workspace import Workspace, env_family
from worldsmith.worldbook import Worldbook, WorldbookStore

__all__ = ["DELTAS", "HELDOUT_STATE", "NO_SPLIT", "render_heldout_chooser", "render_heldout_delta"]

DELTAS = "wb_heldout_deltas"  # {name:parent:version:held-out: HeldOutDelta | error text}
CHECKS = "wb_heldout_checks"  # {book hash:held-out key: why it is refused, or None}
NO_SPLIT = "(none)"
DATASET_KEY, SPLIT_KEY = "wb_heldout_dataset", "wb_heldout_split"
HELDOUT_STATE = PageState({DATASET_KEY: str, SPLIT_KEY: str},
                          params={DATASET_KEY: "heldout_dataset", SPLIT_KEY: "heldout_split"})
SHOWN_FLIPS = 30
DELTA_KEY = "heldout-delta"  # the delta's container (`.st-key-heldout-delta`), scrolled to after a save
_SCROLL_JS = """
<script>
(function () {
  // Bring the held-out delta into view once it has been drawn (it is scored after the save's rerun).
  let tries = 0;
  function go() {
    const el = window.parent.document.querySelector('.st-key-heldout-delta') ||
               document.querySelector('.st-key-heldout-delta');
    if (el) { el.scrollIntoView({behavior: 'auto', block: 'start'}); return; }
    if (++tries < 40) setTimeout(go, 250);
  }
  setTimeout(go, 100);
})();
</script>
"""
METRIC_LABELS = {"exact_match": "exact match", "token_f1": "token F1", "json_f1": "JSON field F1"}


def _first_sight(datasets: list[str], default: str | None) -> None:
    """Nothing kept yet (the page restored `HELDOUT_STATE` first): the book's source dataset, no split."""
    if st.session_state.get(DATASET_KEY) not in datasets:
        st.session_state[DATASET_KEY] = default if default in datasets else (datasets[0] if datasets else None)
    st.session_state.setdefault(SPLIT_KEY, NO_SPLIT)


def render_heldout_chooser(workspace: Workspace, book: Worldbook, default_dataset: str | None,
                           env: str | None = None) -> HeldOut | None:
    """Dataset and split of the held-out set (kept in session and URL by the page, `HELDOUT_STATE`); None until one
    is chosen and leak-free.
    A book built on one environment (`env`, else the book's own env id) is scored on that environment only."""
    datasets = workspace.list_datasets()
    if not datasets:
        st.caption("No datasets in this workspace: no held-out set to score edits against.")
        return None
    _first_sight(datasets, default_dataset)
    left, right = st.columns(2)
    dataset = left.selectbox("Held-out dataset", datasets, key=DATASET_KEY)
    splits = workspace.dataset(dataset).splits() if dataset else []
    options = [NO_SPLIT, *splits]
    if st.session_state.get(SPLIT_KEY) not in options:
        st.session_state[SPLIT_KEY] = NO_SPLIT
    split = right.selectbox("Held-out split (scored after every edit)", options, key=SPLIT_KEY,
                            help="Give the dataset splits with `worldsmith split`; the book must not be built "
                                 "from this split.")
    if split == NO_SPLIT or not dataset:
        st.caption("Choose a held-out split to see, after every edit, how held-out fidelity moved.")
        return None
    env = env or env_family(book.env_id) or None
    heldout = HeldOut(dataset=dataset, split=split, env=env)
    problem = _checked(workspace, book, heldout)
    if problem is not None:
        st.error(f"Held-out set {md_code(heldout.label())} refused: {md_escape(problem)}", icon=":material/block:")
        return None
    return heldout


def _checked(workspace: Workspace, book: Worldbook, heldout: HeldOut) -> str | None:
    """Why `heldout` cannot be scored against `book` (leakage, a missing split), None when it can; kept per
    (book content, set, dataset revision) for the session, so reruns do not reread the split."""
    key = f"{heldout_scores.book_hash(book)}:{heldout.key(workspace.dataset(heldout.dataset).revision)}"
    memo: dict[str, str | None] = st.session_state.setdefault(CHECKS, {})
    if key not in memo:
        try:
            heldout_scores.check_heldout(book, heldout, workspace)
            memo[key] = None
        except (LeakageError, ValueError, LookupError) as error:
            memo[key] = str(error)
    return memo[key]


def _delta(store: WorldbookStore, workspace: Workspace, name: str, parent: str, version: str,
           heldout: HeldOut) -> HeldOutDelta | str:
    key = f"{name}:{parent}:{version}:{heldout.model_dump_json()}"
    memo: dict[str, HeldOutDelta | str] = st.session_state.setdefault(DELTAS, {})
    if key not in memo:
        bar = st.progress(0.0, text="Scoring the held-out set (only versions not scored before)…")

        def progress(done: int, total: int, _what: str) -> None:
            bar.progress(min(done / max(total, 1), 1.0), text=f"Scored {done:d} of {total:d} held-out turns…")

        try:
            memo[key] = heldout_scores.heldout_delta(store.load(name, parent), store.load(name, version), heldout,
                                                     workspace, progress=progress)
        except (LeakageError, ValueError) as error:
            memo[key] = str(error)
        bar.empty()
    return memo[key]


def _metric_line(label: str, value: heldout_scores.MetricDelta) -> str:
    return (f"{md_escape(label)}: {value.before:.3f} → {value.after:.3f}, **{value.diff:+.3f}** "
            f"\\[{value.low:+.3f}, {value.high:+.3f}\\] on {value.n:d} turns")


def render_heldout_delta(store: WorldbookStore, workspace: Workspace, name: str, version: str, parent: str | None,
                         heldout: HeldOut, *, scroll_into_view: bool = False) -> None:
    """The paired delta of `version` against `parent` on `heldout`, and its flipped turns as Traces links with
    what the edit changed; `scroll_into_view` right after an edit was saved."""
    if parent is None:
        st.caption("This is the book's first version: the next edit's held-out delta shows here.")
        return
    with st.container(key=DELTA_KEY):
        _render_delta(store, workspace, name, version, parent, heldout)
    if scroll_into_view:
        st.html(_SCROLL_JS, unsafe_allow_javascript=True)


def _render_delta(store: WorldbookStore, workspace: Workspace, name: str, version: str, parent: str,
                  heldout: HeldOut) -> None:
    delta = _delta(store, workspace, name, parent, version, heldout)
    if isinstance(delta, str):
        st.error(f"Held-out delta refused: {md_escape(delta)}", icon=":material/block:")
        return
    st.markdown(f"**Held-out delta of {md_code(version)} against its parent {md_code(parent)}** on "
                f"{md_code(delta.heldout.label())} ({delta.episodes:d} episodes, {delta.turns:d} turns; after − "
                f"before, 95% paired bootstrap over episodes)")
    lines = [_metric_line(METRIC_LABELS.get(m, m), v) for m, v in delta.metrics.items()]
    for action, metrics in delta.by_action.items():
        lines += [_metric_line(f"{action}: {METRIC_LABELS.get(m, m)}", v) for m, v in metrics.items()]
    body = "\n".join("- " + line for line in lines)  # each line escaped by _metric_line
    st.markdown(body)
    provenance_caption([delta.provenance])
    st.markdown(f"**{len(delta.fixed):d} fixed, {len(delta.broken):d} broken** held-out turns")
    for turn in delta.flipped[:SHOWN_FLIPS]:
        st.page_link(page_file("traces"), label=f"{md_escape(turn.kind)} {md_escape(turn.turn_id)} · {md_escape(turn.action)}",
                     icon=":material/link:", query_params=turn_query(heldout.dataset, turn.turn_id))
        render_text_diff(turn.before, turn.after, label="what the edit changed (before → after)")
        if turn.target == (turn.before if turn.kind == "broken" else turn.after):
            st.caption(f"The target is the {'before' if turn.kind == 'broken' else 'after'}.")
        else:
            render_text_diff(turn.target, turn.after, label="the after against the target")
    if len(delta.flipped) > SHOWN_FLIPS:
        st.caption(f"and {len(delta.flipped) - SHOWN_FLIPS:d} more (`worldsmith book patch --against` lists all)")
