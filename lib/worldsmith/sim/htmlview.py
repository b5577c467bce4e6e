"""Side-by-side steps as HTML, for the workbench (st.markdown) and notebooks (ipywidgets.HTML).

Observations are untrusted text: every character that HTML or Streamlit's markdown gives a
meaning to (`<`, `&`, `*`, `_`, `$`, `:`, `[`, ...) becomes a numeric character reference, and
newlines become `<br>`, so a fragment is one line that markdown keeps as a raw HTML block and
shows literally. The colours: red marks words a method said that the real observation does not
have; green marks words of the real observation the method left out.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any

from worldsmith.sim.scoring import DiffSegment

__all__ = ["DIFF_LEGEND", "diff_html", "escape_html", "step_html", "text_html"]

_SPECIAL = re.compile(r"[\\`*_{}\[\]()#+\-.!|~$:=^@%]")
_BOX = ("font-family:ui-monospace,monospace;font-size:0.85rem;white-space:pre-wrap;word-break:break-word;"
        "line-height:1.45")
_INSERT = "background:#ffd7d5;color:#82071e;border-radius:3px"
_DELETE = "background:#ccf5d3;color:#055d20;border-radius:3px;text-decoration:underline dotted"
DIFF_LEGEND = ("red: words the method said that the real observation does not have; "
               "green: words of the real observation the method left out")


def escape_html(text: str) -> str:
    """`text` as inert HTML that markdown leaves alone: references for special characters, `<br>` for newlines."""
    escaped = html.escape(text, quote=True)
    escaped = _SPECIAL.sub(lambda match: f"&#{ord(match.group())};", escaped)
    return escaped.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "<br>")


def _box(body: str) -> str:
    return f'<div style="{_BOX}">{body}</div>'


def text_html(text: str, *, empty: str = "(empty observation)") -> str:
    """Plain text in the observation box (the real column)."""
    return _box(escape_html(text) if text else f"<i>{escape_html(empty)}</i>")


def diff_html(segments: Sequence[DiffSegment], *, empty: str = "(empty observation)") -> str:
    """A prediction with its differences from the real observation coloured (see the module docstring)."""
    parts = []
    for segment in segments:
        body = escape_html(segment.text)
        if segment.op == "equal":
            parts.append(body)
        elif segment.op == "insert":
            parts.append(f'<span style="{_INSERT}" title="not in the real observation">{body}</span>')
        else:
            parts.append(f'<span style="{_DELETE}" title="in the real observation, missing here">{body}</span>')
    return _box("".join(parts) if parts else f"<i>{escape_html(empty)}</i>")


def _value(value: Any, limit: int = 160) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _changes_html(changes: Sequence[Any]) -> str:
    if not changes:
        return "<i>state unchanged</i>"
    items = []
    for change in changes[:20]:
        if change.added or change.removed:
            detail = " ".join([*(f"+{_value(v, 60)}" for v in change.added), *(f"−{_value(v, 60)}" for v in change.removed)])
        elif change.kind == "added":
            detail = f"= {_value(change.after)}"
        elif change.kind == "removed":
            detail = "removed"
        else:
            detail = f"{_value(change.before)} → {_value(change.after)}"
        items.append(f"<li><code>{escape_html(change.path)}</code> {escape_html(detail)}</li>")
    more = f"<li>… {len(changes) - 20} more</li>" if len(changes) > 20 else ""
    return f'<ul style="margin:0;padding-left:1.2em">{"".join(items)}{more}</ul>'


def step_html(view: Any) -> str:
    """One `StepView` as a table: the action, then a column for the real observation and one per method."""
    header = f"<b>Step {view.index}</b> &gt; <code>{escape_html(view.action_text)}</code>"
    if not view.recorded:
        header += " <i>(typed: no real observation)</i>"
    elif view.teacher_forced:
        header += " <i>(teacher forcing)</i>"
    titles, cells = [], []
    if view.real is not None:
        titles.append("real")
        cells.append(text_html(view.real))
    for name, step in view.methods.items():
        titles.append(escape_html(name))
        if step.error is not None:
            cells.append(f"<b>error</b>: {escape_html(step.error)}")
            continue
        body = diff_html(step.diff) if step.diff is not None else text_html(step.observation)
        route = step.audit.route if step.audit is not None else ""
        facts = [f"outcome {escape_html(step.outcome)}", f"route {escape_html(route)}"]
        if step.score is not None:
            facts.insert(0, f"exact {step.score.exact:.0f} · F1 {step.score.f1:.2f} · edit {step.score.edit:.2f}")
        cells.append(f"{body}<div style='font-size:0.8rem;color:#555'>{' · '.join(facts)}</div>"
                     f"<div style='font-size:0.8rem'>{_changes_html(step.changes)}</div>")
    cell_style = "vertical-align:top;border:1px solid #ddd;padding:6px;min-width:12em"
    head = "".join(f"<th style='{cell_style}'>{title}</th>" for title in titles)
    row = "".join(f"<td style='{cell_style}'>{cell}</td>" for cell in cells)
    return (f"<div>{header}</div><table style='border-collapse:collapse;width:100%'><tr>{head}</tr>"
            f"<tr>{row}</tr></table>")
