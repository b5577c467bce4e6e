"""What produced a number, said the same way on every page: the library's `NumberProvenance` (method, model,
dataset, split, n, run) drawn as a caption under a table or chart, or as a `help=` tooltip.

Pages never build their own description of a number's origin: they get the record from the library (an evaluation
report, a held-out delta, a consistency report, a training run's probe) and hand it here.
"""

from __future__ import annotations

from collections.abc import Iterable

import streamlit as st

from workbench.common.text import md_code, md_escape
from worldsmith.llm import provenance

__all__ = ["PRODUCED_BY", "provenance_caption", "provenance_help", "provenance_markdown"]

PRODUCED_BY = "Produced by"  # how every provenance caption starts (the browser tests look for it)


def provenance_markdown(records: Iterable[provenance.NumberProvenance | None]) -> str:
    """One line per record (method, model, dataset, split, n, run, protocol), then each distinct command once."""
    shown = [record for record in records if record is not None]
    if not shown:
        return ""
    lines = [f"{PRODUCED_BY}: {md_escape(record.line(with_command=False))}" for record in shown]
    commands = dict.fromkeys(record.command for record in shown if record.command)
    lines += [f"Command: {md_code(command)}" for command in commands]
    return "  \n".join(lines)


def provenance_caption(records: Iterable[provenance.NumberProvenance | None], container: object = st) -> None:
    """A caption under a table, chart or headline saying what produced its numbers (`container`: a column, a tab)."""
    text = provenance_markdown(records)
    if text:
        container.caption(text)  # type: ignore[attr-defined]


def provenance_help(record: provenance.NumberProvenance | None) -> str | None:
    """A `help=` tooltip for one number (st.metric, a widget): the record's line, command included."""
    return md_escape(record.line()) if record is not None else None
