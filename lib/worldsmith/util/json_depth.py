"""How deeply a parsed JSON value nests, found without recursion.

A hostile record nested thousands deep crashes recursive code (RecursionError, orjson's 255-level writer); every
place that takes such a value from outside measures it here first, iteratively, and stops as soon as the limit is
passed, so the check itself can neither recurse nor walk a huge value past the point of rejection.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

__all__ = ["json_depth", "text_too_deep", "too_deep"]

_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


def json_depth(value: Any, limit: int | None = None) -> int:
    """The nesting depth of `value` (a scalar 0, `[]` or `{}` 1, `[[1]]` 2); with `limit`, counting stops at
    `limit + 1`, so a value deeper than the limit costs no more than walking its first `limit + 1` levels."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if limit is not None and deepest > limit:
                return deepest
        stack.extend((child, depth) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def too_deep(value: Any, limit: int) -> bool:
    """Whether `value` nests deeper than `limit` levels."""
    return json_depth(value, limit) > limit


def text_too_deep(text: str | None, limit: int) -> bool:
    """Whether `text`, read as JSON (an object or array), nests deeper than `limit` levels; text that is not JSON
    is never too deep. Cheap for the usual text: fewer brackets than the limit cannot nest past it; otherwise the
    brackets outside strings are counted in one linear scan, and a deep scan is confirmed by parsing (so plain
    text with stray brackets is not taken for deep JSON)."""
    if not text:
        return False
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "{[" or text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for token in _TOKEN.finditer(text):
        char = token.group()
        if char in "[{":
            depth += 1
            if depth > limit:
                break
        elif char in "]}":
            depth -= 1
    else:
        return False
    try:
        return too_deep(orjson.loads(text), limit)
    except orjson.JSONDecodeError as error:
        message = str(error).lower()
        return "depth" in message or "recursion" in message
