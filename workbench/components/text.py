"""Putting untrusted text (trace content, ids, paths, URL parameters) into Streamlit markdown."""

from __future__ import annotations

import re
from typing import Any

_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def md_escape(text: Any) -> str:
    """Text shown literally inside markdown: no formatting, links, directives or HTML."""
    return _SPECIAL.sub(r"\\\1", " ".join(str(text).splitlines()))


def md_code(text: Any) -> str:
    """Inline code span holding `text` verbatim, whatever backticks it contains."""
    body = " ".join(str(text).splitlines())
    longest = max((len(run) for run in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"
