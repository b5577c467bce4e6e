"""The one before/after view of the workbench: what differs between two observations, field by field.

Used wherever a page shows a before and an after (a held-out turn an edit fixed or broke, a record a tool call
changed, a method's answer beside the real one, a wrong prediction on the Failures tab), so they all read alike.
Two JSON texts show a row per path added, removed or changed (`worldsmith.traces.observation_diff`); a value
longer than `FOLD` characters is folded to its start, the whole of it one click away (an HTML `<details>`, so the
view works inside expanders, which cannot nest). Other text shows the after text with the words that differ
marked. Every value is untrusted: it reaches the page (st.html, which no Markdown reads) only through `html.escape`.
"""

from __future__ import annotations

import html
import json
from typing import Any

import streamlit as st

from worldsmith.traces import JsonChange, ObservationDiff, observation_diff

__all__ = ["FOLD", "diff_html", "render_diff", "render_text_diff"]

FOLD = 80  # characters of a value shown before it is folded

_STYLE = """<style>
.ws-diff {margin: 0.2rem 0 0.6rem}
.ws-diff-title {font-size: 0.85rem}
.ws-diff-table {border-collapse: collapse; width: 100%}
.ws-diff-table td, .ws-diff-table th, .ws-diff-words {font-family: ui-monospace, monospace; font-size: 0.82rem;
  word-break: break-word; white-space: pre-wrap; vertical-align: top; padding: 3px 6px; text-align: left}
.ws-diff-table td, .ws-diff-table th {border: 1px solid rgba(128, 128, 128, 0.3)}
tr.ws-diff-added {background: rgba(46, 160, 67, 0.12)}
tr.ws-diff-removed {background: rgba(248, 81, 73, 0.12)}
tr.ws-diff-changed {background: rgba(210, 153, 34, 0.12)}
ins.ws-diff-ins {background: rgba(46, 160, 67, 0.25); text-decoration: none; border-radius: 3px}
del.ws-diff-del {background: rgba(248, 81, 73, 0.25); border-radius: 3px}
</style>"""


def _escape(text: str) -> str:
    return html.escape(text, quote=True)


def _value_html(value: Any, *, present: bool) -> str:
    if not present:
        return ""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= FOLD:
        return _escape(text)
    return (f'<details class="ws-diff-fold"><summary>{_escape(text[:FOLD])}… '
            f"({len(text):,} characters)</summary>{_escape(text)}</details>")


def _changes_html(changes: tuple[JsonChange, ...] | list[JsonChange]) -> str:
    head = "".join(f"<th>{name}</th>" for name in ("path", "change", "before", "after"))
    rows = []
    for change in changes:
        cells = (f"<code>{_escape(change.path or '/')}</code>", change.kind,
                 _value_html(change.before, present=change.kind != "added"),
                 _value_html(change.after, present=change.kind != "removed"))
        rows.append(f"<tr class='ws-diff-{change.kind}'>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>")
    return f"<table class='ws-diff-table'><tr>{head}</tr>{''.join(rows)}</table>"


def _words_html(diff: ObservationDiff) -> str:
    parts = []
    for segment in diff.segments:
        body = _escape(segment.text)
        if segment.op == "equal":
            parts.append(body)
        elif segment.op == "insert":
            parts.append(f"<ins class='ws-diff-ins' title='only in the after'>{body}</ins>")
        else:
            parts.append(f"<del class='ws-diff-del' title='only in the before'>{body}</del>")
    return f"<div class='ws-diff-words'>{''.join(parts) or '<i>(empty)</i>'}</div>"


def diff_html(diff: ObservationDiff, *, label: str) -> str:
    """The diff as one HTML fragment (its style first): a label line with the counts, then the field table or the
    marked words."""
    title = (f"<div class='ws-diff-title'><b>{_escape(label)}</b> · "
             f"<span class='ws-diff-summary'>{_escape(diff.summary())}</span></div>")
    if diff.same:
        body = ""
    elif diff.kind == "json":
        body = _changes_html(diff.changes)
    else:
        body = _words_html(diff)
    return f"{_STYLE}<div class='ws-diff' data-kind='{diff.kind}'>{title}{body}</div>"


def render_diff(diff: ObservationDiff, *, label: str) -> None:
    """Draw a diff (see the module docstring)."""
    st.html(diff_html(diff, label=label))


def render_text_diff(before: str | None, after: str | None, *, label: str) -> ObservationDiff:
    """Diff two observation texts (by field when both are JSON) and draw it; returns the diff."""
    diff = observation_diff(before, after)
    render_diff(diff, label=label)
    return diff
