"""Train/validation/test splits assigned by trajectory family, never splitting a family.

A family is `traces.families.family_of`: the episode's `family`, else its `task_id` without a trial or
seed suffix, else the episode itself (the grouping of building's folds and the leakage checks). Families are
shuffled with the seed and dealt out by largest remainder, so the split sizes follow the
ratios as closely as whole families allow and every split with a positive ratio gets at least
one family when there are enough. Dialogue-only episodes (no tool turn) are assigned with their
family like any other and counted per split (`dialogue_only`): building and evaluation leave them out.
"""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from worldsmith.traces.families import family_of
from worldsmith.util.atomic import atomic_write
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.dataset import SPLITS, Dataset

__all__ = ["DEFAULT_RATIOS", "assign_splits", "parse_ratios"]

DEFAULT_RATIOS: dict[str, float] = {"train": 0.8, "validation": 0.1, "test": 0.1}


def parse_ratios(text: str) -> dict[str, float]:
    """`train=0.8,validation=0.1,test=0.1` -> dict; ratios are normalised to sum to 1."""
    ratios: dict[str, float] = {}
    for item in text.split(","):
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise BadInputError(f"bad split ratio {item!r}: expected NAME=FRACTION")
        try:
            ratios[name.strip()] = float(value)
        except ValueError:
            raise BadInputError(f"bad split ratio {item!r}: {value!r} is not a number") from None
    return _normalise(ratios)


def _normalise(ratios: dict[str, float]) -> dict[str, float]:
    if not ratios or any(v < 0 for v in ratios.values()) or sum(ratios.values()) <= 0:
        raise BadInputError(f"split ratios must be non-negative and not all zero: {ratios}")
    total = sum(ratios.values())
    return {name: value / total for name, value in ratios.items()}


def _allocate(n_families: int, ratios: dict[str, float]) -> dict[str, int]:
    exact = {name: ratio * n_families for name, ratio in ratios.items()}
    counts = {name: math.floor(value) for name, value in exact.items()}
    positive = [name for name, ratio in ratios.items() if ratio > 0]
    if n_families >= len(positive):
        for name in positive:
            if counts[name] == 0:
                counts[name] = 1
    while sum(counts.values()) > n_families:  # take back from splits that keep at least one family
        reducible = [name for name in counts if counts[name] > 1] or [name for name in counts if counts[name] > 0]
        largest = max(reducible, key=lambda name: (counts[name] - exact[name], counts[name]))
        counts[largest] -= 1
    remainders = sorted(exact, key=lambda name: exact[name] - counts[name], reverse=True)
    index = 0
    while sum(counts.values()) < n_families:
        counts[remainders[index % len(remainders)]] += 1
        index += 1
    return counts


def assign_splits(dataset: Dataset, ratios: dict[str, float] | None = None, *, seed: int = 0) -> dict[str, Any]:
    """Assign every episode of `dataset` to a split by family; returns counts per split."""
    ratios = _normalise(dict(ratios or DEFAULT_RATIOS))
    rows = dataset.connect().execute(
        "SELECT episode_id, family, task_id, n_turns = 0 FROM raw_episodes ORDER BY episode_id"
    ).fetchall()
    members: dict[str, list[str]] = {}
    dialogue_only: set[str] = set()
    for episode_id, declared, task_id, turnless in rows:
        members.setdefault(family_of(declared, task_id, episode_id), []).append(episode_id)
        if turnless:
            dialogue_only.add(episode_id)
    families = sorted(members)
    random.Random(seed).shuffle(families)
    counts = _allocate(len(families), ratios)
    assignment: dict[str, str] = {}
    family_split: dict[str, str] = {}
    cursor = 0
    for name, count in counts.items():
        for family in families[cursor : cursor + count]:
            family_split[family] = name
            for episode_id in members[family]:
                assignment[episode_id] = name
        cursor += count
    table = pa.table({"episode_id": list(assignment), "split": list(assignment.values())})
    summary = {
        name: {
            "families": sum(1 for s in family_split.values() if s == name),
            "episodes": sum(1 for s in assignment.values() if s == name),
            "dialogue_only": sum(1 for e, s in assignment.items() if s == name and e in dialogue_only),
        }
        for name in ratios
    }
    with dataset.locked():
        with atomic_write(dataset.path / SPLITS) as handle:
            pq.write_table(table, handle)
        manifest = dataset.manifest
        manifest["splits"] = {
            "seed": seed, "ratios": ratios, "by": "family (else task_id without trial or seed, else episode)",
            "counts": summary, "at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        dataset.write_manifest(manifest)
    return {"dataset": dataset.name, "seed": seed, "ratios": ratios, "splits": summary}
