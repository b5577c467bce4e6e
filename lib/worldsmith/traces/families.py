"""What a trajectory family is: the one definition that splits, folds and leakage checks all group by.

Trajectories of one family (the same game or task, other trials or seeds) must never sit on both sides of a
train/test split or a cross-fitting fold: the episode's declared `family`, else its task id without a trial or
seed suffix (`.../trial_3`, `-s2`, `_s2`, `#4`), else the episode itself.
"""

from __future__ import annotations

import re

from worldsmith.traces.model import Episode

__all__ = ["family_of", "trajectory_family"]

_TRIAL_OR_SEED = re.compile(r"(/trial_[^/]*|[-_]s\d+$|#.*$)")


def family_of(family: str | None, task_id: str | None, episode_id: str) -> str:
    """The family from an episode's stored fields (what a dataset query returns)."""
    if family:
        return family
    return _TRIAL_OR_SEED.sub("", task_id or episode_id)


def trajectory_family(episode: Episode) -> str:
    """The family of an episode."""
    return family_of(episode.family, episode.task_id, episode.id)
