"""How deeply a parsed JSON value nests, found without recursion.

A hostile record nested thousands deep crashes recursive code (RecursionError, orjson's 255-level writer); every
place that takes such a value from outside measures it here first, iteratively, and stops as soon as the limit is
passed, so the check itself can neither recurse nor walk a huge value past the point of rejection.
"""

from __future__ import annotations

from typing import Any

__all__ = ["json_depth", "too_deep"]


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
