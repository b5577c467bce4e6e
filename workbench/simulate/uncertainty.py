"""How unsure the book is about an action (`worldsmith.sim.uncertainty`), on the Simulate page.

Assessed with the book's own harness (no model calls), never on page load: for the action being stepped, and for
candidate actions when asked (typed, or the admissible actions a recorded episode listed at this turn). Actions
are untrusted text: they reach the page through dataframes and st.code only.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
import streamlit as st

from workbench.common.provenance import provenance_caption
from workbench.common.text import md_code, md_escape
from worldsmith.llm import provenance
from worldsmith.sim import Harness, Session, Uncertainty, assess, rank_actions
from worldsmith.worldbook import Worldbook

__all__ = ["CANDIDATE_COLUMNS", "assess_step", "candidates_frame", "recorded_admissible", "rank_candidates",
           "render_uncertainty"]

CANDIDATE_COLUMNS = ["action", "score", "source", "rule status", "evidence", "action seen", "situation seen", "reason"]


def _harness(session: Session, book: Worldbook) -> Harness:
    harness = Harness(book)
    session.attach(harness)
    return harness


def assess_step(session: Session, book: Worldbook, action: str) -> Uncertainty:
    """The book's uncertainty about `action` at the end of the session (before it is played)."""
    return assess(_harness(session, book), action)


def rank_candidates(session: Session, book: Worldbook, actions: Sequence[str]) -> list[Uncertainty]:
    """The candidates at the end of the session, the most informative first."""
    return rank_actions(_harness(session, book), [a for a in dict.fromkeys(a.strip() for a in actions) if a])


def candidates_frame(items: Sequence[Uncertainty]) -> pd.DataFrame:
    rows = [{"action": u.action, "score": round(u.score, 3), "source": u.source or "nothing",
             "rule status": u.rule_status or "", "evidence": u.evidence, "action seen": u.action_seen,
             "situation seen": u.feature_seen, "reason": u.reason} for u in items]
    return pd.DataFrame(rows, columns=CANDIDATE_COLUMNS)


def recorded_admissible(root: str, session: Session) -> list[str]:
    """The admissible actions the recorded episode a session opens as listed at the session's turn (none when the
    session is not from an episode, it has played past the record, or the environment lists none)."""
    from workbench.common import data

    source = (session.meta.get("metadata") or {}).get("from_episode") or {}
    dataset = data.open_dataset(root, source.get("dataset"))
    if dataset is None or not source.get("episode"):
        return []
    try:
        episode = dataset.episode(source["episode"], with_state=False)
    except KeyError:
        return []
    turn = len(session)
    info: dict[str, Any] | None = episode.initial_info if turn == 0 else (
        episode.turns[turn - 1].info if turn - 1 < len(episode.turns) else None)
    listed = (info or {}).get("admissible_actions")
    return [str(action) for action in listed] if isinstance(listed, list) else []


def render_uncertainty(item: Uncertainty, *, dataset: str | None = None, split: str | None = None,
                       run: str | None = None) -> None:
    """One assessment: the score, what would answer, the rule status, the evidence and the novelty, the reason;
    the caption says what measured the expected error (the book's route table on the `dataset` and `split` it was
    built from, None: not recorded; `run` the book as name@version)."""
    st.markdown(f"**How unsure the book was** · {md_code(item.source or 'nothing answers')}")
    columns = st.columns(6)
    columns[0].metric("score", f"{item.score:.2f}", help="expected information for the book: 1 = nothing answers, "
                      "never seen")
    columns[5].metric("expected error", f"{item.expected_error:.2f}",
                      help=f"the answer's source level {item.level:.2f}, moved toward its held-out error rate "
                           f"({item.measured_exact:d} exact of {item.measured:d} turns measured)")
    columns[1].metric("rule status", md_escape(item.rule_status or "none"))
    columns[2].metric("evidence", f"{item.evidence:d}", help="trace turns backing the answer")
    columns[3].metric("action seen", f"{item.action_seen:d}", help="book turns of this action type")
    columns[4].metric("situation seen", f"{item.feature_seen:d}",
                      help="book turns of this action type in this situation (argument shown before, repeat)")
    provenance_caption([provenance.NumberProvenance(
        method=f"harness route table, held-out record of {item.source or 'nothing'}", model="none", dataset=dataset,
        split=split, n=item.measured, unit="turns", run=run)])
    st.text(item.reason)
