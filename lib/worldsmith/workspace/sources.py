"""Episodes named by trace files and/or a workspace dataset: what a training run and a served simulator take as
their tasks, read one way."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from worldsmith.traces import read_traces
from worldsmith.traces.dialogue import exclude_dialogue_only
from worldsmith.traces.import_report import Reject
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.workspace import Workspace


def episodes_from(paths: Sequence[Path], *, dataset: str | None = None, split: str | None = None,
                  workspace: str | Path | None = None) -> list[Episode]:
    """The episodes of trace files (any importable format; callers resolve relative paths their own way) and of
    a workspace dataset, keeping `split` only when given. A record that is not an episode raises `ValueError`
    naming its file and line: tasks are not a place to skip bad input silently. Dialogue-only episodes (no tool
    turn) are no task to act in or learn from and are left out."""
    episodes: list[Episode] = []
    if paths:
        for item in read_traces(list(paths)):
            if isinstance(item, Reject):
                raise BadInputError(f"{item.location()}: not an episode: {item.reason}")
            if split is None or item.split == split:
                episodes.append(item)
    if dataset:
        episodes += list(Workspace(workspace).dataset(dataset).iter_episodes(split))
    return exclude_dialogue_only(episodes)[0]
