"""Where work units run: in this process, in a local process pool, or as Ray tasks (local or a cluster).

`collect` (task x policy) and `run_eval` (episode x method) hand their units to one executor and
write every result themselves, in the driver: workers only compute, so the run store is written
exactly as the in-process path writes it, and resume and progress stay in one place.

A unit function is a module-level function `fn(context, payload) -> result` (importable by the
workers: no lambdas); `context` is what every unit shares (sent once per worker process, or put once
in Ray's object store), `payload` is the unit. Outcomes come back as units finish, in any order.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import socket
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from worldsmith.util.errors import BadInputError, UnavailableError
from worldsmith.util.processes import main_module_hidden

__all__ = ["LOCAL_RAY", "Executor", "InlineExecutor", "ProcessExecutor", "RayExecutor", "RayUnavailableError",
           "UnitOutcome", "check_ray_address", "make_executor", "ray_session"]

LOCAL_RAY = "local"  # `--ray` without an address: start a Ray on this machine for the run
UnitFunction = Callable[[Any, Any], Any]
OutcomeKind = Literal["ok", "error", "timeout", "crashed"]
# Variables Ray's workers get: one thread each (the units are the parallelism), no Hub downloads.
WORKER_ENV = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


class RayUnavailableError(UnavailableError, ConnectionError):
    """Nothing answers at the Ray address (a `ConnectionError`, as callers caught before)."""


@dataclass
class UnitOutcome:
    """One finished unit: its index in the submitted payloads and its result, or why there is none.

    `error` is the unit function's own exception ("error"); "timeout" and "crashed" mean the worker was
    killed or died, the message saying how.
    """

    index: int
    kind: OutcomeKind
    value: Any = None
    error: BaseException | None = None
    message: str = ""


class Executor(Protocol):
    """Runs `function(context, payload)` for every payload; yields outcomes as units finish."""

    def run(self, function: UnitFunction, context: Any, payloads: Sequence[Any], *,
            timeout: float | None = None) -> Generator[UnitOutcome, None, None]: ...


class InlineExecutor:
    """Every unit in this process, in order (no timeout protection)."""

    def run(self, function: UnitFunction, context: Any, payloads: Sequence[Any], *,
            timeout: float | None = None) -> Generator[UnitOutcome, None, None]:
        for index, payload in enumerate(payloads):
            try:
                value = function(context, payload)
            except Exception as error:  # noqa: BLE001 - handed to the caller, which accounts it
                yield UnitOutcome(index, "error", error=error, message=f"{type(error).__name__}: {error}")
                continue
            yield UnitOutcome(index, "ok", value)


_PROCESS_CONTEXT: Any = None


def _set_process_context(context: Any) -> None:
    global _PROCESS_CONTEXT
    os.environ.update(WORKER_ENV)
    _PROCESS_CONTEXT = context


def _call_in_process(function: UnitFunction, payload: Any) -> Any:
    return function(_PROCESS_CONTEXT, payload)


class ProcessExecutor:
    """A pool of `workers` spawned processes; the context is sent once to each.

    No per-unit timeout: a worker that dies breaks the pool, and the units left are reported crashed.
    """

    def __init__(self, workers: int) -> None:
        if workers < 1:
            raise BadInputError(f"workers must be at least 1, not {workers}")
        self.workers = workers

    def run(self, function: UnitFunction, context: Any, payloads: Sequence[Any], *,
            timeout: float | None = None) -> Generator[UnitOutcome, None, None]:
        if not payloads:
            return
        pool = concurrent.futures.ProcessPoolExecutor(
            max_workers=min(self.workers, len(payloads)), mp_context=multiprocessing.get_context("spawn"),
            initializer=_set_process_context, initargs=(context,))
        try:
            with main_module_hidden():
                futures = {pool.submit(_call_in_process, function, payload): index
                           for index, payload in enumerate(payloads)}
            for future in concurrent.futures.as_completed(futures):
                index = futures[future]
                try:
                    yield UnitOutcome(index, "ok", future.result())
                except concurrent.futures.process.BrokenProcessPool as error:
                    yield UnitOutcome(index, "crashed", error=error,
                                      message=f"{type(error).__name__}: a worker process died")
                except Exception as error:  # noqa: BLE001 - the unit's own failure
                    yield UnitOutcome(index, "error", error=error, message=f"{type(error).__name__}: {error}")
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def check_ray_address(address: str, timeout: float = 5.0) -> None:
    """Fail fast with `RayUnavailableError` (a `ConnectionError`) when nothing listens at a Ray address
    (`ray.init` retries for minutes).

    `auto` (the address of `ray start` on this machine) is left to Ray."""
    if address == "auto":
        return
    hostport = address.removeprefix("ray://").rstrip("/")
    host, _, port = hostport.rpartition(":")
    if not host or not port.isdigit():
        raise BadInputError(f"Ray address {address!r}: expected HOST:PORT or ray://HOST:PORT")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as error:
        raise RayUnavailableError(f"no Ray cluster answers at {address} ({error}): start one with `ray start --head` "
                                  "or check the address") from None


def ray_session(address: str | None = LOCAL_RAY, num_cpus: int | None = None) -> bool:
    """Connect to Ray (a cluster `address`, e.g. `ray://head:10001` or `head:6379`), or start a local one
    (`local`/None) with `num_cpus` CPUs and no dashboard; returns whether this call started it (and so
    should `ray.shutdown()` it). An already initialized Ray is used as it is."""
    try:
        import ray
    except ModuleNotFoundError:
        raise ModuleNotFoundError("--ray needs the ray package: pip install 'worldsmith[scale]'") from None

    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "ignore_reinit_error": True,
                              "runtime_env": {"env_vars": dict(WORKER_ENV)}}
    if address and address != LOCAL_RAY:
        check_ray_address(address)
        kwargs["address"] = address
    else:
        kwargs["num_cpus"] = num_cpus or max(1, int(os.cpu_count() or 1))
    ray.init(**kwargs)
    return True


class RayExecutor:
    """Units as Ray tasks, at most `workers` in flight (default: the cluster's CPUs).

    A unit past `timeout` seconds is cancelled (its worker process killed) and reported "timeout"; a
    worker that dies is reported "crashed"; Ray starts fresh workers for the units left.
    """

    def __init__(self, address: str | None = LOCAL_RAY, workers: int | None = None) -> None:
        self.address = address
        self.workers = workers

    def run(self, function: UnitFunction, context: Any, payloads: Sequence[Any], *,
            timeout: float | None = None) -> Generator[UnitOutcome, None, None]:
        if not payloads:
            return
        started_ray = ray_session(self.address, self.workers)  # first: a missing ray is a clear error there
        import ray
        try:
            capacity = self.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
            remote = ray.remote(num_cpus=1, max_retries=0)(function)
            shared = ray.put(context)
            queue = list(range(len(payloads)))
            queue.reverse()
            flying: dict[Any, tuple[int, float]] = {}  # ref -> (index, submitted)
            try:
                while queue or flying:
                    while queue and len(flying) < capacity:
                        index = queue.pop()
                        flying[remote.remote(shared, payloads[index])] = (index, time.monotonic())
                    wait_for = None
                    if timeout is not None:
                        deadline = min(started + timeout for _, started in flying.values())
                        wait_for = max(0.0, deadline - time.monotonic())
                    ready, _ = ray.wait(list(flying), num_returns=1, timeout=wait_for)
                    for ref in ready:
                        index, _ = flying.pop(ref)
                        yield self._outcome(ray, ref, index)
                    if timeout is not None:
                        now = time.monotonic()
                        for ref, (index, started) in list(flying.items()):
                            if now - started > timeout:
                                ray.cancel(ref, force=True)
                                del flying[ref]
                                yield UnitOutcome(index, "timeout",
                                                  message=f"no result within {timeout:g} s: worker killed")
            finally:
                for ref in flying:
                    ray.cancel(ref, force=True)
        finally:
            if started_ray:
                ray.shutdown()

    @staticmethod
    def _outcome(ray: Any, ref: Any, index: int) -> UnitOutcome:
        try:
            return UnitOutcome(index, "ok", ray.get(ref))
        except (ray.exceptions.WorkerCrashedError, ray.exceptions.NodeDiedError,
                ray.exceptions.LocalRayletDiedError) as error:
            return UnitOutcome(index, "crashed", error=error,
                               message=f"{type(error).__name__}: the worker process died")
        except ray.exceptions.RayTaskError as error:
            cause = error.cause if isinstance(error.cause, BaseException) else error
            return UnitOutcome(index, "error", error=cause, message=f"{type(cause).__name__}: {cause}")


def make_executor(workers: int = 0, ray_address: str | None = None) -> Executor:
    """The executor for a run's settings: Ray when `ray_address` is set (`local`: a Ray on this machine with
    `workers` CPUs, default all), else a process pool of `workers` (>= 2), else this process."""
    if ray_address:
        return RayExecutor(ray_address, workers or None)
    if workers >= 2:
        return ProcessExecutor(workers)
    return InlineExecutor()
