"""'Replay this rule on the evidence': where one rule is chosen, where its template fits, where it fails.

The result is kept per (version, rule) in session_state, so it stays on screen across reruns and
is dropped when the rule or the version shown changes (a replay of another rule would mislead).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.common.links import turn_link
from workbench.common.text import md_escape
from workbench.worldbook.rule_card import render_turn_links
from worldsmith.worldbook import Rule, RuleReplay, Worldbook, check_rule

__all__ = ["REPLAYS", "render_rule_replay", "replay_frame", "replay_key"]

REPLAYS = "wb_replays"  # {replay key: RuleReplay}


def replay_key(version: str, rule_id: str) -> str:
    return f"{version}:{rule_id}"


def replay_frame(replay: RuleReplay, dataset: str | None) -> pd.DataFrame:
    """One row per turn of the rule's action: the verdict, why, the observation and what the rule renders."""
    verdict = {True: "matched", False: "failed", None: "not applicable"}
    return pd.DataFrame([{"turn": t.turn_id, "traces": turn_link(dataset, t.turn_id), "result": verdict[t.ok],
                          "reason": t.reason, "observed": t.expected, "rendered": t.rendered} for t in replay.turns],
                        columns=["turn", "traces", "result", "reason", "observed", "rendered"])


def render_rule_replay(book: Worldbook, version: str, rule: Rule, dataset: str | None) -> None:
    """A button that replays `rule` (whatever its status) on the book's evidence, and its result."""
    key = replay_key(version, rule.id)
    replays: dict[str, RuleReplay] = st.session_state.setdefault(REPLAYS, {})
    for stale in [k for k in replays if k != key]:
        del replays[stale]
    if st.button("Replay this rule on the evidence", key=f"wb_replay:{key}", icon=":material/replay:",
                 disabled=not book.evidence, help=None if book.evidence else "This worldbook holds no evidence."):
        with st.spinner("Replaying"):
            replays[key] = check_rule(book, rule)
    replay = replays.get(key)
    if replay is None:
        return
    checked, applicable, matched, failed = len(replay.turns), replay.applicable, replay.matched, replay.failed
    columns = st.columns(4)
    for column, label, value in zip(columns, ("turns of its action", "chosen", "matched", "failed"),
                                    (checked, applicable, matched, failed), strict=True):
        column.metric(label, value)
    if not replay.turns:
        st.caption(f"No evidence turns for action {md_escape(repr(rule.action))}.")
        return
    st.dataframe(replay_frame(replay, dataset), hide_index=True,
                 column_config={"traces": st.column_config.LinkColumn("traces", display_text="open")})
    render_turn_links("Failed turns", [t.turn_id for t in replay.turns if t.ok is False], dataset)
