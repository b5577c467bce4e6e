"""ScienceWorld (Wang et al., 2022) behind the `Env` protocol: 30 science tasks, 7,207 variations.

Task ids are `<task_name>:<variation>` (`boil:0`, `find-animal:12`); `<task_name>` alone means
variation 0, and ScienceWorld's task numbers (`1-1`, `1-1:3`) and paper names (`Matter Changes of
State (Boiling)`) name the same tasks. `tasks()` lists every task x variation in ScienceWorld's own
task order (1-1 ... 10-2), or only the variations of ScienceWorld's train/dev/test split with `split=`.

ScienceWorld is a Scala simulator reached through py4j. One JVM is started per adapter instance
(lazily, on the first `tasks()`/`reset()`) and every episode reloads a task into it; `close()` shuts
it down. Every call into the JVM runs with a timeout: a JVM that stops answering is killed and the
call raises `EnvError` (the next `reset()` starts a fresh JVM) instead of hanging the caller.

What the adapter reports, and why:
- Observations are the simulator's text verbatim (it has no interpreter chrome to strip). The
  opening observation is the answer to `look around`, as `scienceworld.ScienceWorldEnv.reset()` does;
  the instruction is `info["task"]`.
- `info["score"]` is ScienceWorld's score as its Python API reports it: 0-100, and -100 once the
  task has failed (e.g. focusing on the wrong object). `reward` is the score delta of the step,
  exactly as the Python API computes it. `won` is the simulator's own completion flag (all ordered
  subgoals done) and never a failed task; `terminated` = won or failed.
- `step_limit` is ScienceWorld's `envStepLimit`: it counts the simulator's moves (time ticks: `wait`
  is 10, `look around` is 0), and an episode whose moves exceed it is `truncated`. None (default):
  no limit, the caller's `max_steps` bounds the episode.
- The expert is ScienceWorld's gold action sequence (`generateGoldPath=True` on load). It is an
  open-loop plan for the freshly loaded task: `expert_action()` returns its next action while
  every action taken so far followed it, and None once an action left it, once the task ended
  (won or failed; gold paths often run a step or two past the win) or once it is used up.
- Determinism: with HotSpot's default random identity hash codes, ScienceWorld lists the objects of
  a room (and picks gold paths: which door, which animal) in an order that changes from load to
  load. The adapter therefore starts its JVM with `-XX:hashCode=2` (`DETERMINISTIC_JAVA_OPTIONS`,
  passed in JAVA_TOOL_OPTIONS for the launch only), which makes identity hashes constant: replaying
  an action list on the same task id then reproduces every observation and the gold path, in the
  same JVM and in a fresh one. `java_options=[]` restores the default (and the reordering).
- `state()` is taken with the simulator's free actions (`freeActionLook`, `freeActionInventory`,
  which run no time tick; the simulator itself calls them before every step for its run history)
  and its goal-progress monitor; taking it changes neither moves nor later observations.
- `reset(seed=...)` is accepted and ignored: ScienceWorld seeds each variation by its index.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from worldsmith.envs.base import (
    EnvBase,
    EnvError,
    EnvUnavailableError,
    Step,
    TaskLoadError,
    UnknownTaskError,
    as_action,
)
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Action, Observation
from worldsmith.util.errors import BadInputError

__all__ = ["ScienceWorldEnv", "parse_task_id"]

SPLITS = ("train", "dev", "test")
MAX_SCORE = 100
_OPENING_ACTION = "look around"
# Every identity hash code is 1, so hash sets of simulator objects iterate in insertion order: with
# HotSpot's default (random) identity hashes the order of objects in room descriptions changes from
# load to load. Ignored by JVMs that lack the flag.
DETERMINISTIC_JAVA_OPTIONS = ("-XX:+IgnoreUnrecognizedVMOptions", "-XX:+UnlockExperimentalVMOptions", "-XX:hashCode=2")
_T = TypeVar("_T")
_LAUNCH_LOCK = threading.Lock()

# Per-process caches: the task catalogue never changes for an installed package version.
_VARIATION_COUNTS: dict[str, int] = {}
_SPLIT_VARIATIONS: dict[str, dict[str, list[int]]] = {}


def _official_task_ids() -> dict[str, str]:
    """ScienceWorld's task numbers ("1-1") to task names, in the paper's order."""
    from scienceworld.constants import ID2TASK

    return dict(ID2TASK)


def _paper_names() -> dict[str, str]:
    """The paper's task names ("Matter Changes of State (Boiling)") to task numbers."""
    from scienceworld.constants import NAME2ID

    return dict(NAME2ID)


def parse_task_id(task: str, known_names: list[str]) -> tuple[str, int]:
    """(task name, variation) for `name[:variation]`, `number[:variation]` or `paper name[:variation]`."""
    base, separator, variation_text = task.rpartition(":") if ":" in task else (task, "", "")
    base = base.strip()
    numbers = _official_task_ids()
    if base in known_names:
        name = base
    elif base in numbers:
        name = numbers[base]
    elif base in _paper_names():
        name = numbers[_paper_names()[base]]
    else:
        raise UnknownTaskError(
            f"unknown scienceworld task {task!r}: no task named {base!r} (ids are <task_name>:<variation> "
            f"or <number>:<variation>, e.g. boil:0 or 1-1:0; list them with make('scienceworld').tasks())"
        )
    if not separator:
        return name, 0
    if not (variation_text.isascii() and variation_text.isdigit()):
        raise UnknownTaskError(
            f"unknown scienceworld task {task!r}: the variation {variation_text!r} is not a number "
            f"(ids are <task_name>:<variation>, e.g. {name}:0; list them with tasks())"
        )
    return name, int(variation_text)


def _parse_goal_progress(text: str) -> dict[str, Any]:
    """The goal monitor's table as JSON: ordered subgoals and unordered/optional ones, done or not."""
    sections: dict[str, list[dict[str, Any]]] = {"subgoals": [], "optional_subgoals": []}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith("Sequential Subgoals"):
            current = "subgoals"
        elif line.startswith("Unordered and Optional Subgoals"):
            current = "optional_subgoals"
        elif current is not None:
            fields = line.split("\t")
            if len(fields) == 4 and fields[0].strip().isdigit():
                sections[current].append({
                    "done": fields[1].strip() == "true",
                    "goal": fields[2].strip(),
                    "description": fields[3].strip(),
                })
    if not sections["subgoals"] and not sections["optional_subgoals"]:
        return {"goal_progress": text}  # an unfamiliar format is kept whole rather than lost
    return sections


def _child_java_pids() -> set[int]:
    """PIDs of this process's child JVMs running the ScienceWorld jar (to stop one that hung starting)."""
    pids: set[int] = set()
    me = os.getpid()
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read().decode(errors="replace")
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if b"scienceworld.jar" in handle.read():
                    pids.add(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    return pids


class _Jvm:
    """One ScienceWorld JVM and the single thread that talks to it, so every call can time out."""

    def __init__(self, start_timeout: float, java_options: list[str]) -> None:
        if shutil.which("java") is None:
            raise EnvUnavailableError(
                "ScienceWorld needs Java 1.8+ on PATH and `java` was not found "
                "(install a JRE, e.g. `apt-get install default-jre-headless`)"
            )
        self.java_options = java_options
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="scienceworld-jvm")
        self.process: subprocess.Popen[bytes] | None = None
        before = _child_java_pids()
        try:
            self.sw = self.call(self._start, start_timeout, "at start-up")
        except Exception as error:
            for pid in _child_java_pids() - before:  # a JVM that failed before py4j handed us its process
                _kill_quietly(pid)
            self._executor.shutdown(wait=False, cancel_futures=True)
            if isinstance(error, EnvError):
                raise
            raise EnvError(f"the ScienceWorld JVM did not start: {type(error).__name__}: {error}") from error
        self.process = self.sw._gateway.java_process

    def _start(self) -> Any:
        from scienceworld.scienceworld import ScienceWorldEnv as PythonApi

        with _java_tool_options(self.java_options):
            return PythonApi(None)

    @property
    def server(self) -> Any:
        return self.sw.server

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def call(self, function: Callable[[], _T], timeout: float, what: str) -> _T:
        """Run `function` on the JVM thread; a JVM that does not answer in time is killed."""
        from py4j.protocol import Py4JJavaError, Py4JNetworkError

        future = self._executor.submit(function)
        try:
            return future.result(timeout=timeout)
        except concurrent.futures.TimeoutError:
            self.kill()
            raise EnvError(
                f"the ScienceWorld JVM did not answer {what} within {timeout:g} s; it was stopped "
                f"(the next reset() starts a fresh one)"
            ) from None
        except Py4JJavaError:
            raise  # the simulator's own exception: callers turn it into a task-specific error
        except Py4JNetworkError as error:
            self.kill()
            raise EnvError(f"lost the connection to the ScienceWorld JVM {what}: {error}") from error

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self._forget_gateway()
        self._executor.shutdown(wait=False, cancel_futures=True)

    def close(self, timeout: float = 20.0) -> None:
        """Shut the gateway down politely, then make sure the JVM process is gone."""
        if self.alive:
            try:
                self.call(self.sw.close, timeout, "while shutting down")
            except Exception:  # noqa: BLE001 - a JVM that fails to shut down is killed below
                pass
            try:
                if self.process is not None:
                    self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                pass
        self.kill()

    def _forget_gateway(self) -> None:
        """The Python API closes its gateway again on garbage collection; after our close that is noise."""
        sw = getattr(self, "sw", None)
        if sw is not None:
            sw.close = lambda: None


@contextmanager
def _java_tool_options(options: list[str]) -> Iterator[None]:
    """JVM options for the JVM launched inside (the Python API offers no way to pass them): set in
    JAVA_TOOL_OPTIONS, which every JVM reads, for the launch only."""
    if not options:
        yield
        return
    with _LAUNCH_LOCK:
        previous = os.environ.get("JAVA_TOOL_OPTIONS")
        os.environ["JAVA_TOOL_OPTIONS"] = " ".join([*([previous] if previous else []), *options])
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop("JAVA_TOOL_OPTIONS", None)
            else:
                os.environ["JAVA_TOOL_OPTIONS"] = previous


def _kill_quietly(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


class ScienceWorldEnv(EnvBase):
    """ScienceWorld tasks x variations with gold action sequences as the expert (see module doc)."""

    name = "scienceworld"

    def __init__(
        self,
        *,
        split: str | None = None,
        step_limit: int | None = None,
        simplifications: str = "",
        gold_path: bool = True,
        state_object_tree: bool = False,
        java_options: list[str] | None = None,
        start_timeout: float = 120.0,
        load_timeout: float = 180.0,
        step_timeout: float = 60.0,
    ) -> None:
        """`split`: None (all variations) or ScienceWorld's "train"/"dev"/"test" variation lists.
        `simplifications`: ScienceWorld's comma-separated simplification string ("easy", "openDoors,...").
        `gold_path=False` skips gold-path generation, which dominates load time (0.1-0.4 s without it,
        0.2-12 s with it; mendelian-genetics is the slowest), and leaves the environment without an expert.
        `state_object_tree=True` adds the simulator's full object tree (~180 KB) to `state()`.
        `java_options`: extra JVM options; None means `DETERMINISTIC_JAVA_OPTIONS` ([] for HotSpot's defaults)."""
        if split not in (None, *SPLITS):
            raise BadInputError(f"split must be one of {', '.join(SPLITS)} or None, not {split!r}")
        if step_limit is not None and step_limit < 1:
            raise BadInputError(f"step_limit must be a positive number of moves or None, not {step_limit!r}")
        self.split = split
        self.step_limit = step_limit
        self.simplifications = simplifications
        self.gold_path = gold_path
        self.state_object_tree = state_object_tree
        self.java_options = list(DETERMINISTIC_JAVA_OPTIONS if java_options is None else java_options)
        self.start_timeout = start_timeout
        self.load_timeout = load_timeout
        self.step_timeout = step_timeout
        self._jvm: _Jvm | None = None
        self._episode: _Episode | None = None

    # -- catalogue -------------------------------------------------------------------------

    def tasks(self) -> list[str]:
        counts = self._variation_counts()
        ids: list[str] = []
        for name in self._ordered_names(counts):
            ids.extend(f"{name}:{variation}" for variation in self._variations(name, counts[name]))
        return ids

    def _ordered_names(self, counts: dict[str, int]) -> list[str]:
        official = [name for name in _official_task_ids().values() if name in counts]
        return official + sorted(set(counts) - set(official))

    def _variations(self, name: str, count: int) -> list[int]:
        if self.split is None:
            return list(range(count))
        return self._split_variations(name)[self.split]

    def _variation_counts(self) -> dict[str, int]:
        if not _VARIATION_COUNTS:
            jvm = self._ensure_jvm()

            def read_counts() -> dict[str, int]:
                return {str(name): int(jvm.server.getTaskMaxVariations(name)) for name in jvm.server.getTaskNames()}

            _VARIATION_COUNTS.update(jvm.call(read_counts, self.load_timeout, "listing tasks"))
        return _VARIATION_COUNTS

    def _split_variations(self, name: str) -> dict[str, list[int]]:
        """ScienceWorld's own train/dev/test lists; its API computes them for the loaded task only, so
        the task name is set without loading the task (the next load sets it again anyway)."""
        if name not in _SPLIT_VARIATIONS:
            jvm = self._ensure_jvm()

            def read_split() -> dict[str, list[int]]:
                server = jvm.server
                previous = server.taskStr()
                getattr(server, "taskStr_$eq")(name)
                try:
                    return {
                        "train": [int(v) for v in server.getVariationsTrain()],
                        "dev": [int(v) for v in server.getVariationsDev()],
                        "test": [int(v) for v in server.getVariationsTest()],
                    }
                finally:
                    getattr(server, "taskStr_$eq")(previous)

            _SPLIT_VARIATIONS[name] = jvm.call(read_split, self.load_timeout, f"listing the splits of {name}")
        return _SPLIT_VARIATIONS[name]

    def _resolve(self, task: str) -> tuple[str, int]:
        counts = self._variation_counts()
        name, variation = parse_task_id(task, list(counts))
        if variation >= counts[name]:
            raise UnknownTaskError(
                f"unknown scienceworld task {task!r}: {name} has variations 0-{counts[name] - 1} "
                f"(list every task id with tasks())"
            )
        if self.split is not None and variation not in self._split_variations(name)[self.split]:
            raise UnknownTaskError(
                f"scienceworld task {task!r} is not in the {self.split} split this environment was made with "
                f"(list its tasks with tasks())"
            )
        return name, variation

    # -- episodes --------------------------------------------------------------------------

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        if task is None:
            task = self.tasks()[0]
        if not isinstance(task, str):
            raise UnknownTaskError(f"a scienceworld task id is text like 'boil:0', not {type(task).__name__}")
        name, variation = self._resolve(task)
        jvm = self._ensure_jvm()
        self._episode = None
        loaded = self._load(jvm, task, name, variation)
        self._episode = _Episode(task_id=task, name=name, variation=variation, gold=loaded["gold"])
        info: dict[str, Any] = {
            "task": loaded["description"],
            "env_id": f"scienceworld/{name}",
            "task_name": name,
            "task_number": _number_of(name),
            "variation": variation,
            "score": loaded["score"],
            "max_score": MAX_SCORE,
            "moves": loaded["moves"],
        }
        if self.gold_path:
            info["gold_length"] = len(loaded["gold"])
        return Observation(text=loaded["observation"]), info

    def _load(self, jvm: _Jvm, task: str, name: str, variation: int) -> dict[str, Any]:
        from py4j.protocol import Py4JJavaError

        server = jvm.server

        def load() -> dict[str, Any]:
            error = server.load(name, variation, self.simplifications, self.gold_path)
            if error:
                return {"error": str(error)}
            interface = server.agentInterface()
            if interface.isDefined() and interface.get().isInErrorState():  # e.g. an unknown simplification
                return {"error": str(interface.get().getErrorStateMessage())}
            return {
                "gold": [str(action) for action in server.getGoldActionSequence()] if self.gold_path else [],
                "observation": str(server.step(_OPENING_ACTION)),
                "score": _score(server),
                "moves": int(server.getNumMoves()),
                "description": str(server.getTaskDescription()),
            }

        try:
            loaded = jvm.call(load, self.load_timeout, f"while loading {task!r}")
        except Py4JJavaError as error:
            raise TaskLoadError(f"scienceworld task {task!r} cannot load: {_java_message(error)}") from None
        if "error" in loaded:
            raise TaskLoadError(f"scienceworld task {task!r} cannot load: {loaded['error']}")
        return loaded

    def step(self, action: Action | str) -> Step:
        episode = self._require_episode()
        jvm = self._ensure_jvm(episode_running=True)
        text = action_line(action, command=True)
        server = jvm.server

        def act() -> dict[str, Any]:
            observation = str(server.step(text))
            score = _score(server)
            failed_in_error = score < 0 and bool(server.agentInterface().get().isInErrorState())
            return {
                "observation": observation,
                "score": score,
                "completed": bool(server.getCompleted()),
                "moves": int(server.getNumMoves()),
                "simulator_error": failed_in_error,
            }

        from py4j.protocol import Py4JJavaError

        try:
            result = jvm.call(act, self.step_timeout, f"to the action {text!r}")
        except Py4JJavaError as error:
            raise EnvError(f"the ScienceWorld simulator failed on {text!r}: {_java_message(error)}") from None
        if result["simulator_error"]:
            raise EnvError(f"the ScienceWorld simulator entered its error state on {text!r}: {result['observation']}")
        score = result["score"]
        reward = score - episode.last_score
        episode.last_score = score
        failed = score < 0
        won = result["completed"] and not failed
        terminated = won or failed
        episode.follow(text, ended=terminated)
        truncated = not terminated and self.step_limit is not None and result["moves"] > self.step_limit
        info = {"score": score, "won": won, "failed": failed, "moves": result["moves"]}
        return Step(Observation(text=result["observation"]), float(reward), terminated, truncated, info)

    def admissible_actions(self) -> list[str] | None:
        """ScienceWorld's valid action-object combinations now (thousands; ~0.15 s to enumerate)."""
        if self._episode is None:
            return None
        jvm = self._ensure_jvm(episode_running=True)
        actions = jvm.call(lambda: list(jvm.server.getValidActionObjectCombinations()), self.step_timeout,
                           "listing valid actions")
        return [str(action) for action in actions]

    def expert_action(self) -> Action | None:
        if not self.gold_path:
            raise NotImplementedError("scienceworld was made with gold_path=False: no gold action sequence")
        episode = self._require_episode()
        next_action = episode.next_gold()
        return as_action(next_action) if next_action is not None else None

    def state(self) -> dict[str, Any] | None:
        """Moves, score, completion, free look/inventory and subgoal progress (see module doc)."""
        episode = self._episode
        if episode is None:
            return None
        jvm = self._ensure_jvm(episode_running=True)
        server = jvm.server

        def snapshot() -> dict[str, Any]:
            score = _score(server)
            taken: dict[str, Any] = {
                "task_name": episode.name,
                "variation": episode.variation,
                "moves": int(server.getNumMoves()),
                "score": score,
                "won": bool(server.getCompleted()) and score >= 0,
                "failed": score < 0,
                "look": str(server.freeActionLook()),
                "inventory": str(server.freeActionInventory()),
                **_parse_goal_progress(str(server.getGoalProgressStr())),
            }
            if self.state_object_tree:
                taken["object_tree"] = jvm.sw.getObjectTree()
            return taken

        return jvm.call(snapshot, self.step_timeout, "taking a state snapshot")

    def close(self) -> None:
        jvm, self._jvm, self._episode = self._jvm, None, None
        if jvm is not None:
            jvm.close()

    # -- plumbing --------------------------------------------------------------------------

    def _ensure_jvm(self, *, episode_running: bool = False) -> _Jvm:
        if self._jvm is not None and self._jvm.alive:
            return self._jvm
        if episode_running:
            self._episode = None
            raise EnvError("the ScienceWorld JVM is gone (stopped or crashed): reset() to start a fresh one")
        if self._jvm is not None:
            self._jvm.kill()
        self._jvm = _Jvm(self.start_timeout, self.java_options)
        return self._jvm

    def _require_episode(self) -> _Episode:
        if self._episode is None:
            raise EnvError("scienceworld: no episode is running (call reset(task) first; close() ends episodes)")
        return self._episode


class _Episode:
    """Where the episode stands relative to the gold path, and the last score (for the reward)."""

    def __init__(self, *, task_id: str, name: str, variation: int, gold: list[str]) -> None:
        self.task_id = task_id
        self.name = name
        self.variation = variation
        self.gold = gold
        self.gold_position = 0
        self.on_gold_path = True
        self.ended = False
        self.last_score = 0

    def follow(self, action: str, *, ended: bool) -> None:
        """Advance along the gold path if `action` was its next step; an ended task needs no expert."""
        if self.on_gold_path and self.gold_position < len(self.gold) and action == self.gold[self.gold_position]:
            self.gold_position += 1
        else:
            self.on_gold_path = False
        self.ended = self.ended or ended

    def next_gold(self) -> str | None:
        if self.on_gold_path and not self.ended and self.gold_position < len(self.gold):
            return self.gold[self.gold_position]
        return None


def _score(server: Any) -> int:
    """The score as ScienceWorld's Python API reports it (0-100; -100 once failed)."""
    return int(round(100 * float(server.getScore())))


def _number_of(name: str) -> str | None:
    for number, task_name in _official_task_ids().items():
        if task_name == name:
            return number
    return None


def _java_message(error: Exception) -> str:
    """The Java exception's first line (py4j appends the whole Java stack trace)."""
    java = getattr(error, "java_exception", None)
    text = str(java) if java is not None else str(error)
    return re.sub(r"\s+", " ", text.strip().splitlines()[0] if text.strip() else repr(error))
