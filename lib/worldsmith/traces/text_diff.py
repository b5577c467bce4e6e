"""Where two observation texts part, word by word, as segments a page can colour.

Beside `json_diff` (what changed between two JSON observations), at the trace layer because both the
simulator's side-by-side view (`sim.scoring` re-exports these) and the worldbook's version compare
(`worldbook.compare`) show it.
"""

from __future__ import annotations

import difflib
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["DiffSegment", "word_diff"]

_PIECE = re.compile(r"\S+\s*")


class DiffSegment(BaseModel):
    """A run of words: in both texts (`equal`), only in the prediction (`insert`), only in the reference (`delete`).

    `text` keeps the whitespace that followed each word, so joining the `equal` and `insert`
    segments gives the prediction back, and `equal` and `delete` the reference (both up to whitespace).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Literal["equal", "insert", "delete"]
    text: str


def word_diff(predicted: str, reference: str) -> list[DiffSegment]:
    """The prediction against the reference as equal/insert/delete runs of words (difflib over words).

    Words are compared exactly (case and punctuation count: that is what a reader sees); a changed
    run is reported as the reference's words (`delete`) followed by the prediction's (`insert`).
    """
    mine, theirs = _PIECE.findall(predicted), _PIECE.findall(reference)
    matcher = difflib.SequenceMatcher(a=[p.strip() for p in theirs], b=[p.strip() for p in mine], autojunk=False)
    segments: list[DiffSegment] = []
    for op, a_start, a_end, b_start, b_end in matcher.get_opcodes():
        if op == "equal":
            pieces = mine[b_start:b_end]
            if pieces[-1] == pieces[-1].rstrip() and theirs[a_end - 1] != theirs[a_end - 1].rstrip():
                pieces = [*pieces[:-1], theirs[a_end - 1]]  # keep the words apart when the reference goes on
            segments.append(DiffSegment(op="equal", text="".join(pieces)))
            continue
        if a_end > a_start:
            segments.append(DiffSegment(op="delete", text="".join(theirs[a_start:a_end])))
        if b_end > b_start:
            segments.append(DiffSegment(op="insert", text="".join(mine[b_start:b_end])))
    return segments
