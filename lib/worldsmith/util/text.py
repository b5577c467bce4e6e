"""Shortening text for prompts and reports, in one place so every caller cuts the same way."""

from __future__ import annotations

__all__ = ["ELLIPSIS", "clip"]

ELLIPSIS = "…"


def clip(text: str, limit: int, *, strip: bool = True, marker: str = ELLIPSIS) -> str:
    """`text` in at most `limit` characters: cut, then `marker` appended, when it is longer.

    `strip` (the default, for prompt fields) trims surrounding whitespace first and before the marker; callers
    that quote text verbatim (the judge, tool dumps) pass `strip=False`.
    """
    if strip:
        text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[: max(limit - len(marker), 0)]
    return (cut.rstrip() if strip else cut) + marker
