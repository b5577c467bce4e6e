"""Give a dataset's episodes another environment id (`worldsmith traces relabel`, the Traces page).

An environment id decides which worldbook an episode is built into and evaluated against; one
derived on import (from a file's tools, `ingest.tool_set_env_id`) can split one API in two, and a
user who knows better relabels. The episodes parts are immutable, so each part holding a
relabelled episode is rewritten to a new file (same rows, same content hashes, the new env id)
and the manifest swapped to it atomically under the dataset's lock: readers see the old parts or
the new, never a mix, and the revision moves so every cache keyed on it is invalidated. The old
files stay until nothing can be reading them (a reader holds a connection per revision). Each
relabel is recorded in the manifest (`relabels`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, Field

from worldsmith.util.atomic import atomic_write
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.dataset import Dataset

__all__ = ["RelabelResult", "check_env_id", "relabel_env"]

MAX_ENV_ID = 200


class RelabelResult(BaseModel):
    """What a relabel changed."""

    dataset: str
    env: str = Field(description="The environment id the episodes now have.")
    episodes: int = Field(description="Episodes whose environment id changed.")
    before: dict[str, int] = Field(description="Their previous environment ids and how many had each "
                                               "('' for episodes that named none).")
    parts: int = Field(description="Parts rewritten.")
    revision: int = Field(description="The dataset revision after the relabel (unchanged when nothing changed).")


def check_env_id(env: str) -> str:
    """`env` stripped; ValueError unless it is a usable environment id (non-empty, one line, at most 200 chars)."""
    text = (env or "").strip()
    if not text:
        raise BadInputError("the environment id is empty")
    if len(text) > MAX_ENV_ID or any(ch in text for ch in "\r\n\t\x00"):
        raise BadInputError(f"not an environment id (one line of at most {MAX_ENV_ID} characters): {text[:60]!r}")
    return text


def relabel_env(dataset: Dataset, env: str, *, only: Iterable[str | None] | None = None) -> RelabelResult:
    """Set the environment id of `dataset`'s episodes to `env`: all of them, or only those whose current id is
    in `only` (None in it: the episodes that name no environment). ValueError for a bad id, or when `only`
    names an environment the dataset does not hold (so a typo never relabels nothing in silence)."""
    env = check_env_id(env)
    wanted = None if only is None else set(only)
    with dataset.locked():
        manifest = dataset.manifest
        present = set(dataset.environments())
        has_unnamed = bool(dataset.connect().execute(
            "SELECT count(*) FROM raw_episodes WHERE env_id IS NULL").fetchone()[0])  # type: ignore[index]
        if wanted is not None:
            unknown = sorted(str(e) for e in wanted if (e is None and not has_unnamed) or (e is not None
                                                                                           and e not in present))
            if unknown:
                raise BadInputError(f"dataset {dataset.name!r} has no episodes of environment {', '.join(unknown)} "
                                 f"(its environments: {', '.join(sorted(present)) or 'none'})")
        before: Counter[str] = Counter()
        parts: list[dict[str, Any]] = []
        rewritten = 0
        stamp = f"r{int(manifest.get('revision', 0)) + 1}"
        for part in manifest.get("parts", []):
            table = pq.read_table(dataset.path / part["episodes"])
            current = table.column("env_id").to_pylist()
            chosen = [value != env and (wanted is None or value in wanted) for value in current]
            if not any(chosen):
                parts.append(part)
                continue
            before.update(value or "" for value, change in zip(current, chosen, strict=True) if change)
            column = pa.array([env if change else value for value, change in zip(current, chosen, strict=True)],
                              pa.string())
            table = table.set_column(table.schema.get_field_index("env_id"), "env_id", column)
            name = part["episodes"].removesuffix(".parquet").split(".env-")[0] + f".env-{stamp}.parquet"
            with atomic_write(dataset.path / name) as handle:
                pq.write_table(table, handle, compression="lz4")
            parts.append({**part, "episodes": name})
            rewritten += 1
        if not rewritten:
            return RelabelResult(dataset=dataset.name, env=env, episodes=0, before={}, parts=0,
                                 revision=dataset.revision)
        manifest["parts"] = parts
        manifest.setdefault("relabels", []).append({
            "env": env, "before": dict(before), "episodes": sum(before.values()),
            "at": datetime.now(UTC).isoformat(timespec="seconds")})
        dataset.write_manifest(manifest)
    return RelabelResult(dataset=dataset.name, env=env, episodes=sum(before.values()), before=dict(sorted(before.items())),
                         parts=rewritten, revision=dataset.revision)
