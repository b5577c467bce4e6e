"""The build as a declared list of stages: each names what it reads and what it makes, and the runner caches,
times and reports every one the same way.

A `Stage` reads named artifacts (`episodes`, `evidence`, `rules`, ...) and makes one. Its cache fingerprint is a
hash of its name, the code version, the build config, its own settings and the fingerprints of the artifacts it
reads, so a stage reruns exactly when something it depends on changed; its output is stored as JSON under the
build's cache folder (`StageCache`), and a rerun or a resumed build reads it back. Every stage sends a
`StageProgress` event when it starts and when it ends (with its seconds and whether the cache answered): the CLI,
the Build page and the build report read stage names and timings from those events and from `StageRun`.

A stage marked `transient` (an attribute; the extract stage) has its output cached, fingerprinted and reported like
any other, but not held in memory once made when no later stage reads it: on a large build its records would
otherwise stay resident to the end.

A new stage is one object: `with_stage(BOOK_STAGES, MyStage(), before="compile")` (how `sim` adds its route
table). The book's own stages are `worldbook.book_stages.BOOK_STAGES`.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

import orjson
from pydantic import TypeAdapter

from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.code_version import code_version

__all__ = ["CODE_VERSION", "Artifacts", "BuildContext", "ProgressCallback", "Stage", "StageCache", "StageProgress", "StageRun",
           "digest", "run_stages", "stage_names", "with_stage"]

CODE_VERSION = code_version()  # a cached stage output from other code is never reused


def digest(*parts: Any) -> str:
    """A short stable hash of JSON-able parts (keys sorted)."""
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(orjson.dumps(part, option=orjson.OPT_SORT_KEYS, default=str))
    return hashed.hexdigest()[:16]


@dataclass(frozen=True)
class StageProgress:
    """One stage starting (`state="started"`) or ending (`"finished"`, with its seconds and whether the stage cache
    answered): `index` of `total` stages, 0-based. `state="done"` ends the build (index == total)."""

    stage: str
    index: int
    total: int
    state: Literal["started", "finished", "done"] = "started"
    seconds: float | None = None
    cached: bool = False

    @property
    def fraction(self) -> float:
        """The share of the build done (a finished stage counts whole)."""
        done = self.index + (self.state != "started")
        return min(1.0, done / max(self.total, 1))

    def to_json(self) -> dict[str, Any]:
        return {"stage": self.stage, "index": self.index, "total": self.total, "state": self.state,
                "seconds": self.seconds, "cached": self.cached}


ProgressCallback = Callable[[StageProgress], None]


class Artifacts:
    """The named values stages read and make, each with its fingerprint (what a reader's cache key includes)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.fingerprints: dict[str, str] = {}

    def put(self, name: str, value: Any, fingerprint: str) -> None:
        self.values[name] = value
        self.fingerprints[name] = fingerprint

    def __getitem__(self, name: str) -> Any:
        if name not in self.values:
            raise KeyError(f"no stage made {name!r} before it was read (made: {', '.join(self.values)})")
        return self.values[name]

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def release(self, name: str) -> None:
        """Forget a value no later stage reads (its fingerprint stays: what it was is still known)."""
        self.values.pop(name, None)


@runtime_checkable
class Stage(Protocol):
    """One step of the build. `inputs` are artifact names it reads (optional ones end in `?`), `output` the one it
    makes, `output_type` what the cache validates it as (None: never cached, e.g. the compiled book)."""

    @property
    def name(self) -> str: ...

    @property
    def inputs(self) -> tuple[str, ...]: ...

    @property
    def output(self) -> str: ...

    @property
    def output_type(self) -> Any: ...

    def settings(self) -> dict[str, Any]:
        """What, besides the build config and the inputs, changes the output (hashed into the fingerprint)."""
        ...

    def run(self, artifacts: Artifacts, context: BuildContext) -> Any: ...


@dataclass
class BuildContext:
    """What every stage may read besides artifacts: the build config, where models log, and the stage reports
    (a stage adds its counts and comparisons under its own name)."""

    config: Any
    name: str = ""
    env_id: str | None = None
    workspace_root: str | Path | None = None
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)  # lazily opened resources (the model), keyed by name
    cache: StageCache | None = None  # where `per_episode` keeps each episode's part
    episode_hashes: Sequence[str] = ()  # the content hash of each episode of the `episodes` artifact, in order

    def report(self, stage: str) -> dict[str, Any]:
        return self.reports.setdefault(stage, {})

    def per_episode(self, stage: str, episodes: Sequence[Any], item_type: Any,
                    compute: Callable[[int, Any], list[Any]]) -> list[Any]:
        """`compute(index, episode)` for every episode, concatenated in order. With a stage cache, each episode's
        part is stored by the stage, code version, config, the episode's id and its content, so a build that adds
        episodes to an earlier one (`worldsmith build --update`) computes only the new episodes' parts; the stage
        report counts `episodes_computed` and `episodes_cached`."""
        cache = self.cache or StageCache(None)
        adapter = _adapter(list[item_type])
        assert adapter is not None
        hashes = self.episode_hashes if len(self.episode_hashes) == len(episodes) else [
            episode.content_hash() for episode in episodes]
        base = digest(stage, CODE_VERSION, self.config.to_json())
        out: list[Any] = []
        cached_count = 0
        for index, (episode, content) in enumerate(zip(episodes, hashes, strict=True)):
            part, cached = cache.part(stage, digest(base, episode.id, content), adapter,
                                      partial(compute, index, episode))
            out += part
            cached_count += cached
        self.report(stage).update(episodes_computed=len(episodes) - cached_count, episodes_cached=cached_count)
        return out


class StageCache:
    """Stage outputs as JSON files named by stage and fingerprint (atomic writes; a damaged file is recomputed), and
    per-episode parts of a stage under `<stage>.episodes/` named by the episode's key."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        if folder is not None:
            folder.mkdir(parents=True, exist_ok=True)

    def run(self, stage: str, key: str, adapter: TypeAdapter[Any] | None,
            compute: Callable[[], Any]) -> tuple[Any, bool]:
        if self.folder is None or adapter is None:
            return compute(), False
        return _cached(self.folder / f"{stage}-{key}.json", adapter, compute)

    def part(self, stage: str, key: str, adapter: TypeAdapter[Any], compute: Callable[[], Any]) -> tuple[Any, bool]:
        """One episode's part of a per-episode stage (`BuildContext.per_episode`)."""
        if self.folder is None:
            return compute(), False
        return _cached(self.folder / f"{stage}.episodes" / key[:2] / f"{key}.json", adapter, compute)


def _cached(path: Path, adapter: TypeAdapter[Any], compute: Callable[[], Any]) -> tuple[Any, bool]:
    if path.exists():
        try:
            return adapter.validate_json(path.read_bytes()), True
        except ValueError:
            path.unlink()  # a damaged cache entry is recomputed, never trusted
    value = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, adapter.dump_json(value))
    return value, False


@dataclass(frozen=True)
class StageRun:
    """What running one stage took."""

    stage: str
    seconds: float
    cached: bool


def stage_names(stages: Sequence[Stage]) -> tuple[str, ...]:
    return tuple(stage.name for stage in stages)


def with_stage(stages: Sequence[Stage], stage: Stage, *, before: str | None = None) -> tuple[Stage, ...]:
    """The stage list with `stage` inserted before the one named `before` (None: at the end)."""
    names = stage_names(stages)
    if stage.name in names:
        raise ValueError(f"the pipeline already has a stage {stage.name!r}")
    if before is None:
        return (*stages, stage)
    if before not in names:
        raise ValueError(f"no stage {before!r} to insert {stage.name!r} before (stages: {', '.join(names)})")
    at = names.index(before)
    return (*stages[:at], stage, *stages[at:])


_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}


def _adapter(output_type: Any) -> TypeAdapter[Any] | None:
    if output_type is None:
        return None
    key = repr(output_type)
    if key not in _ADAPTERS:
        _ADAPTERS[key] = TypeAdapter(output_type)
    return _ADAPTERS[key]


def _check_inputs(stages: Sequence[Stage], given: Mapping[str, Any]) -> None:
    made = set(given)
    for stage in stages:
        missing = [name for name in stage.inputs if not name.endswith("?") and name not in made]
        if missing:
            raise ValueError(f"stage {stage.name!r} reads {', '.join(missing)}, which no earlier stage makes")
        made.add(stage.output)


def run_stages(stages: Sequence[Stage], artifacts: Artifacts, context: BuildContext, *, cache: StageCache,
               progress: ProgressCallback | None = None) -> list[StageRun]:
    """Run the stages in order over `artifacts` (the inputs already in it), each cached by its fingerprint."""
    _check_inputs(stages, artifacts.values)
    context.cache = context.cache or cache
    read_later = [{name.rstrip("?") for later in stages[index + 1:] for name in later.inputs}
                  for index in range(len(stages))]
    config_json = context.config.to_json()
    runs: list[StageRun] = []
    total = len(stages)
    for index, stage in enumerate(stages):
        if progress:
            progress(StageProgress(stage.name, index, total))
        reads = [name.rstrip("?") for name in stage.inputs]
        key = digest(stage.name, CODE_VERSION, config_json, stage.settings(),
                     [artifacts.fingerprints.get(name) for name in reads])
        adapter = _adapter(stage.output_type)
        started = time.perf_counter()
        value, cached = cache.run(stage.name, key, adapter, partial(stage.run, artifacts, context))
        seconds = round(time.perf_counter() - started, 4)
        if adapter is not None:  # a stage that is never cached (the compiled book) has no "cached" to report
            context.report(stage.name)["cached"] = cached
        fingerprint = digest(key) if adapter is not None else digest(key, "uncached")
        artifacts.put(stage.output, value, fingerprint)
        if getattr(stage, "transient", False) and stage.output not in read_later[index]:
            artifacts.release(stage.output)
        runs.append(StageRun(stage.name, seconds, cached))
        if progress:
            progress(StageProgress(stage.name, index, total, "finished", seconds, cached))
    if progress:
        progress(StageProgress("done", total, total, "done"))
    return runs
