"""Putting untrusted text (trace content, ids, paths, file text, model output, URL parameters, exception
messages) into Streamlit Markdown: the one place the workbench escapes it.

Streamlit renders Markdown in bodies (st.markdown, st.caption, headers, alerts, toasts, st.write of a
str), in labels (widgets, expanders, tabs, page links, progress and spinner text), in `help` tooltips, in
st.metric values and in radio options. Every value interpolated there goes through `md_escape` (read as
text) or `md_code` (an inline code span); the workbench's own literal text may stay Markdown.
tests/workbench/test_untrusted_text.py checks every page and component for it. Plain-text elements
(st.code, st.text, st.json, st.dataframe, select box options) take the raw text: escaping there would
show the backslashes.
"""

from __future__ import annotations

import re
from typing import Any

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:&])")


def md_escape(text: Any) -> str:
    """Text shown literally inside markdown: no formatting, links, images, directives, entities or HTML."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def literal_table(frame: Any) -> Any:
    """A copy of a pandas frame whose text cells and index show literally in `st.table` (which renders
    Markdown in its cells: an untrusted image or link would load or open)."""
    shown = frame.map(lambda value: md_escape(value) if isinstance(value, str) else value)
    shown.index = [md_escape(value) if isinstance(value, str) else value for value in shown.index]
    shown.index.name = frame.index.name
    return shown


def md_code(text: Any) -> str:
    """Inline code span holding `text` verbatim, whatever backticks it contains."""
    body = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def pretty_text(text: Any) -> str:
    """An observation for st.code: a JSON object or array indented (so a real result and a prediction read
    alike), other text as it is; None / NaN as ""."""
    import json

    if text is None or (isinstance(text, float) and text != text):
        return ""
    value = str(text)
    if value.lstrip()[:1] in ("{", "["):
        try:
            return json.dumps(json.loads(value), indent=2, ensure_ascii=False)
        except ValueError:
            return value
    return value
