"""Collect episodes from a real environment into a workspace dataset: resumable, parallel, guarded.

A collection run lives in `<workspace>/runs/collect/<dataset>/`:
- `episodes.jsonl`: every finished episode (native JSON, one per line, appended and fsynced);
- `results.jsonl`: one summary per finished work item (task, success, steps, error kind);
- `config.json`: the configuration of the latest run.
Rerunning the same collection skips work items already in `results.jsonl` (their key is task,
policy, seed), so an interrupted run resumes. Each worker is a separate process that builds its
own environment from the registry; an episode that exceeds its wall-clock budget gets its worker
killed and replaced, and is reported as a timeout while the run goes on. With `ray_address` the work
items run as Ray tasks (`collect_unit`) under the same accounting; the run files are still written
here, by the driver. At the end the kept
episodes (by default only successful ones for the expert policy) are ingested into the dataset;
re-ingesting after a resume skips what is already there (content-hash dedupe).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import multiprocessing
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any, Literal

import orjson

from worldsmith.envs.base import TaskLoadError, UnknownTaskError
from worldsmith.envs.policies import make_policy
from worldsmith.envs.recorder import episode_id_for, record_episode
from worldsmith.envs.registry import EnvSpec, spec
from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.errors import BadInputError
from worldsmith.util.executors import make_executor
from worldsmith.util.processes import main_module_hidden
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = [
    "CollectConfig", "CollectProgress", "CollectReport", "EpisodeResult", "collect", "collect_unit", "list_tasks",
    "load_run_episodes", "run_dir",
]

Keep = Literal["success", "all"]


@dataclass
class CollectConfig:
    """What to collect. `tasks=None` takes the environment's own task list."""

    env: str
    tasks: list[str] | None = None
    policy: str = "expert"
    policy_options: dict[str, Any] = field(default_factory=dict)  # constructor keywords (the curious policy's weights)
    episodes: int | None = None  # default: one per task; more cycles through the tasks with new seeds
    seed: int = 0
    max_steps: int | None = None  # default: the spec's
    workers: int = 1  # 0 runs in this process (no timeout protection); with ray_address: Ray tasks at once (0: all CPUs)
    ray_address: str | None = None  # run the work items as Ray tasks: "local" (a Ray on this machine) or a cluster address
    episode_timeout: float = 600.0
    keep: Keep | None = None  # default: "success" for the expert policy, else "all"
    record_state: bool = True
    env_kwargs: dict[str, Any] = field(default_factory=dict)
    actions: list[str | dict[str, Any]] | None = None  # for the replay policy: text or action objects
    model: str | None = None  # for the llm policy: a model spec (its calls are cached and logged in the workspace)
    workspace_root: str | None = None  # set by collect(): where the llm policy's cache and call log live

    def resolved_keep(self) -> Keep:
        return self.keep or ("success" if self.policy == "expert" else "all")


@dataclass
class EpisodeResult:
    """One finished work item."""

    key: str
    task: str
    seed: int
    episode_id: str | None
    status: Literal["ok", "failed", "load_error", "unknown_task", "timeout", "crashed"]
    success: bool | None = None
    reward: float | None = None
    steps: int = 0
    seconds: float = 0.0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class CollectProgress:
    done: int
    total: int
    result: EpisodeResult | None


@dataclass
class CollectReport:
    dataset: str
    env: str
    policy: str
    results: list[EpisodeResult]
    skipped: int  # finished in an earlier run
    ingested: int
    duplicates: int
    run_dir: str

    @property
    def episodes(self) -> int:
        return sum(r.episode_id is not None for r in self.results)

    @property
    def wins(self) -> int:
        return sum(bool(r.success) for r in self.results)

    @property
    def win_rate(self) -> float | None:
        played = [r for r in self.results if r.status in ("ok", "failed", "timeout", "crashed")]
        return sum(bool(r.success) for r in played) / len(played) if played else None

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for result in self.results:
            out[result.status] = out.get(result.status, 0) + 1
        return out

    def summary(self) -> dict[str, Any]:
        return {
            "dataset": self.dataset, "env": self.env, "policy": self.policy,
            "work_items": len(self.results), "skipped_already_done": self.skipped,
            "episodes": self.episodes, "wins": self.wins, "win_rate": self.win_rate, "status": self.counts(),
            "ingested": self.ingested, "duplicates": self.duplicates, "run_dir": self.run_dir,
            "failures": [r.to_json() for r in self.results if r.status != "ok" or not r.success],
        }


def run_dir(workspace_root: Path, dataset: str) -> Path:
    return WorkspaceLayout.of(workspace_root).run_dir("collect", dataset)


@dataclass(frozen=True)
class _Item:
    key: str
    task: str
    seed: int


def _work_items(config: CollectConfig, tasks: list[str]) -> list[_Item]:
    if not tasks:
        raise BadInputError(f"environment {config.env!r} has no tasks to collect: pass --tasks")
    count = config.episodes if config.episodes is not None else len(tasks)
    if count < 0:
        raise BadInputError("the number of episodes cannot be negative")
    items = []
    for index in range(count):
        task = tasks[index % len(tasks)]
        seed = config.seed + index // len(tasks)
        items.append(_Item(f"{task}|{config.policy}|{seed}", task, seed))
    return items


def _play(env: Any, config: CollectConfig, item: _Item, max_steps: int) -> tuple[EpisodeResult, dict[str, Any] | None]:
    """Play one work item in an already-built environment (in a worker or in-process)."""
    started = time.perf_counter()
    policy = make_policy(config.policy, seed=item.seed, actions=config.actions, model=config.model,
                         workspace_root=config.workspace_root, options=config.policy_options)
    base: dict[str, Any] = {"key": item.key, "task": item.task, "seed": item.seed}
    try:
        episode = record_episode(
            env, policy, item.task, max_steps=max_steps, seed=item.seed, record_state=config.record_state,
            episode_id=episode_id_for(config.env, item.task, config.policy, item.seed), env_kwargs=config.env_kwargs,
        )
    except UnknownTaskError as error:
        return EpisodeResult(**base, episode_id=None, status="unknown_task", error=str(error)), None
    except TaskLoadError as error:
        return EpisodeResult(**base, episode_id=None, status="load_error", error=str(error)), None
    except Exception as error:  # noqa: BLE001 - the reset itself failed: report, go on
        return EpisodeResult(**base, episode_id=None, status="crashed", error=f"{type(error).__name__}: {error}"), None
    failure = episode.metadata.get("error")
    result = EpisodeResult(
        **base, episode_id=episode.id, status="crashed" if failure else ("ok" if episode.success else "failed"),
        success=episode.success, reward=episode.reward, steps=len(episode.turns),
        seconds=round(time.perf_counter() - started, 3), error=failure,
    )
    return result, episode.model_dump(mode="json", exclude_defaults=True)


def _worker_main(connection: Connection, config_json: bytes, spec_json: bytes) -> None:
    """A worker process: build the environment once, then play the items sent to it.

    The spec travels with the work: an environment registered at run time (a notebook, a test)
    is unknown to the fresh registry of a spawned process.
    """
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    config = CollectConfig(**orjson.loads(config_json))
    fields = orjson.loads(spec_json)
    env_spec = _spec_from_json(fields)
    max_steps = config.max_steps or env_spec.max_steps
    env = None
    try:
        while True:
            message = connection.recv()
            if message is None:
                break
            item = _Item(**message)
            if env is None:
                try:
                    env = env_spec.make(**config.env_kwargs)
                except Exception as error:  # noqa: BLE001 - reported per item, the parent decides
                    result = EpisodeResult(item.key, item.task, item.seed, None, "crashed",
                                           error=f"cannot start {config.env}: {type(error).__name__}: {error}")
                    connection.send_bytes(orjson.dumps({"result": result.to_json(), "episode": None}))
                    continue
            result, episode = _play(env, config, item, max_steps)
            connection.send_bytes(orjson.dumps({"result": result.to_json(), "episode": episode}))
    except (EOFError, KeyboardInterrupt):
        pass
    finally:
        if env is not None:
            env.close()


class _Worker:
    def __init__(self, context: Any, config_json: bytes, spec_json: bytes) -> None:
        self.connection, child_end = context.Pipe()
        self.process = context.Process(target=_worker_main, args=(child_end, config_json, spec_json), daemon=True)
        with main_module_hidden():
            self.process.start()
        child_end.close()
        self.item: _Item | None = None
        self.started = 0.0

    def send(self, item: _Item) -> None:
        self.item = item
        self.started = time.monotonic()
        self.connection.send({"key": item.key, "task": item.task, "seed": item.seed})

    def kill(self) -> None:
        self.process.kill()
        self.process.join(5)
        self.connection.close()

    def stop(self) -> None:
        try:
            self.connection.send(None)
        except (BrokenPipeError, OSError):
            pass
        self.process.join(10)
        if self.process.is_alive():
            self.kill()


def _run_parallel(config: CollectConfig, items: list[_Item]) -> Iterator[tuple[EpisodeResult, dict[str, Any] | None]]:
    context = multiprocessing.get_context("spawn")  # no forked JVMs or TextWorld interpreters
    config_json = orjson.dumps(asdict(config))
    env_spec = spec(config.env)
    spec_json = orjson.dumps(asdict(env_spec))
    count = max(1, min(config.workers, len(items)))
    if not env_spec.parallel:
        count = 1
    queue = list(reversed(items))
    workers = [_Worker(context, config_json, spec_json) for _ in range(count)]
    try:
        for worker in workers:
            if queue:
                worker.send(queue.pop())
        while any(worker.item is not None for worker in workers):
            busy = {worker.connection: worker for worker in workers if worker.item is not None}
            deadline = min(w.started + config.episode_timeout for w in busy.values())
            ready = wait(list(busy), timeout=max(0.0, deadline - time.monotonic()))
            for position, worker in enumerate(workers):
                item = worker.item
                if item is None:
                    continue
                outcome: tuple[EpisodeResult, dict[str, Any] | None] | None = None
                replace = False
                if worker.connection in ready:
                    try:
                        message = orjson.loads(worker.connection.recv_bytes())
                        outcome = EpisodeResult(**message["result"]), message["episode"]
                    except (EOFError, OSError):
                        worker.process.join(5)
                        code = worker.process.exitcode
                        outcome = EpisodeResult(item.key, item.task, item.seed, None, "crashed",
                                                error=f"the environment process died (exit code {code})"), None
                        replace = True
                elif time.monotonic() - worker.started > config.episode_timeout:
                    outcome = EpisodeResult(item.key, item.task, item.seed, None, "timeout",
                                            error=f"no result within {config.episode_timeout:g} s: process killed"), None
                    replace = True
                if outcome is None:
                    continue
                worker.item = None
                yield outcome
                if replace:
                    worker.kill()
                    worker = workers[position] = _Worker(context, config_json, spec_json)
                if queue:
                    worker.send(queue.pop())
    finally:
        for worker in workers:
            if worker.item is None:
                worker.stop()
            else:
                worker.kill()


def _spec_from_json(fields: dict[str, Any]) -> EnvSpec:
    return EnvSpec(**{**fields, "requires": tuple(fields["requires"])})


_UNIT_ENV: dict[str, Any] = {}  # per Ray worker process: the environment of the run it serves, kept between items


def collect_unit(context: dict[str, Any], item: dict[str, Any]) -> dict[str, Any]:
    """One work item in an executor's worker (a Ray task): the environment is built on the worker's first item
    of the run and kept for the next, as a local worker process keeps it."""
    config = CollectConfig(**context["config"])
    env_spec = _spec_from_json(context["spec"])
    unit = _Item(**item)
    key = context["key"]
    if key not in _UNIT_ENV:
        for env in _UNIT_ENV.values():
            env.close()
        _UNIT_ENV.clear()
        try:
            _UNIT_ENV[key] = env_spec.make(**config.env_kwargs)
        except Exception as error:  # noqa: BLE001 - reported per item, as a local worker reports it
            result = EpisodeResult(unit.key, unit.task, unit.seed, None, "crashed",
                                   error=f"cannot start {config.env}: {type(error).__name__}: {error}")
            return {"result": result.to_json(), "episode": None}
    result, episode = _play(_UNIT_ENV[key], config, unit, config.max_steps or env_spec.max_steps)
    return {"result": result.to_json(), "episode": episode}


def _run_executor(config: CollectConfig, items: list[_Item]) -> Iterator[tuple[EpisodeResult, dict[str, Any] | None]]:
    """The items as Ray tasks; timeouts and dead workers are accounted as the local workers account them."""
    env_spec = spec(config.env)
    workers = config.workers if env_spec.parallel else 1
    executor = make_executor(max(0, workers), config.ray_address)
    context: dict[str, Any] = {"config": asdict(config), "spec": asdict(env_spec)}
    context["key"] = hashlib.sha256(orjson.dumps(context, option=orjson.OPT_SORT_KEYS)).hexdigest()
    outcomes = executor.run(collect_unit, context, [asdict(item) for item in items], timeout=config.episode_timeout)
    with contextlib.closing(outcomes):
        for outcome in outcomes:
            item = items[outcome.index]
            if outcome.kind == "ok":
                yield EpisodeResult(**outcome.value["result"]), outcome.value["episode"]
            elif outcome.kind == "timeout":
                yield EpisodeResult(item.key, item.task, item.seed, None, "timeout",
                                    error=f"no result within {config.episode_timeout:g} s: process killed"), None
            else:
                yield EpisodeResult(item.key, item.task, item.seed, None, "crashed",
                                    error=f"the environment process died ({outcome.message})"), None


def _run_inline(config: CollectConfig, items: list[_Item]) -> Iterator[tuple[EpisodeResult, dict[str, Any] | None]]:
    env_spec = spec(config.env)
    env = env_spec.make(**config.env_kwargs)
    try:
        for item in items:
            yield _play(env, config, item, config.max_steps or env_spec.max_steps)
    finally:
        env.close()


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Lines of a run file; a torn last line (the run was killed mid-write) is skipped."""
    if not path.exists():
        return
    with open(path, "rb") as handle:
        for line in handle:
            try:
                yield orjson.loads(line)
            except orjson.JSONDecodeError:
                continue


def _append(handle: Any, record: dict[str, Any]) -> None:
    handle.write(orjson.dumps(record) + b"\n")
    handle.flush()
    os.fsync(handle.fileno())


def list_tasks(env_name: str, env_kwargs: dict[str, Any] | None = None) -> list[str]:
    env = spec(env_name).make(**(env_kwargs or {}))
    try:
        return list(env.tasks())
    finally:
        env.close()


def collect(
    workspace: Any,
    dataset: str,
    config: CollectConfig,
    *,
    progress: Callable[[CollectProgress], None] | None = None,
) -> CollectReport:
    """Run `config` and ingest the kept episodes into `dataset` of `workspace` (a `Workspace`)."""
    env_spec = spec(config.env)
    missing = env_spec.missing()
    if missing:
        env_spec.make()  # raises EnvUnavailableError with the install hint
    if config.policy == "llm" and not config.model:
        raise BadInputError("the llm policy needs a model spec (--model)")
    if config.policy_options:  # bad options fail here, not once per work item in the workers
        make_policy(config.policy, seed=config.seed, options=config.policy_options)
    config = dataclasses.replace(config, workspace_root=str(workspace.root))
    tasks = config.tasks if config.tasks else list_tasks(config.env, config.env_kwargs)
    items = _work_items(config, tasks)
    folder = run_dir(Path(workspace.root), dataset)
    folder.mkdir(parents=True, exist_ok=True)
    atomic_write_json(folder / "config.json", asdict(config))
    results_path, episodes_path = folder / "results.jsonl", folder / "episodes.jsonl"
    wanted_keys = {item.key for item in items}
    results: list[EpisodeResult] = [  # finished by an earlier run of this collection
        EpisodeResult(**record) for record in _read_jsonl(results_path) if record.get("key") in wanted_keys
    ]
    done_keys = {result.key for result in results}
    todo = [item for item in items if item.key not in done_keys]
    skipped = len(items) - len(todo)
    if progress:
        progress(CollectProgress(skipped, len(items), None))
    runner = _run_executor if config.ray_address else _run_inline if config.workers <= 0 else _run_parallel
    with open(results_path, "ab") as results_file, open(episodes_path, "ab") as episodes_file:
        for result, episode in runner(config, todo):
            if episode is not None:
                _append(episodes_file, episode)  # the episode first: a result line means it is stored
            _append(results_file, result.to_json())
            results.append(result)
            if progress:
                progress(CollectProgress(len(results), len(items), result))
    keep = config.resolved_keep()
    wanted = {r.episode_id for r in results if r.episode_id and (keep == "all" or r.success)}
    ingested = duplicates = 0
    if wanted:
        staging = folder / "to_ingest.jsonl"
        seen: set[str] = set()
        with open(staging, "wb") as handle:
            for record in _read_jsonl(episodes_path):
                episode_id = record.get("id")
                if episode_id in wanted and episode_id not in seen:
                    seen.add(episode_id)
                    handle.write(orjson.dumps(record) + b"\n")
        report = workspace.ingest([staging], dataset, format="native")
        staging.unlink(missing_ok=True)
        ingested, duplicates = report.episodes, report.duplicates
    return CollectReport(dataset, config.env, config.policy, results, skipped, ingested, duplicates, str(folder))


def load_run_episodes(workspace_root: Path, dataset: str) -> Iterator[Episode]:
    """Every episode a collection run recorded (kept or not), for failure analysis."""
    for record in _read_jsonl(run_dir(workspace_root, dataset) / "episodes.jsonl"):
        yield Episode.model_validate(record)
