"""Leak-safe defaults shared by the pages: build from the training split, look and evaluate on a held-out one.

A choice that leaks stays possible (each page names the leak when it is made); these are only the defaults a page
opens on, so the first number a newcomer reads is an honest one.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["HELD_OUT_SPLITS", "TRAIN_SPLIT", "build_split", "held_out_split"]

TRAIN_SPLIT = "train"
HELD_OUT_SPLITS = ("test", "validation")  # in order of preference


def build_split(splits: Sequence[str]) -> str | None:
    """The split to build from by default: `train` when the dataset has it (None: every episode)."""
    return TRAIN_SPLIT if TRAIN_SPLIT in splits else None


def held_out_split(splits: Sequence[str], built_from: str | None = None) -> str | None:
    """The split to look at or evaluate on by default: `test`, else `validation`, never the one a book was
    `built_from` (None: the dataset has no held-out split)."""
    return next((split for split in HELD_OUT_SPLITS if split in splits and split != built_from), None)
