"""The `Env` protocol over HTTP: a FastAPI server holding env instances, and `HttpEnv`, its client.

A trainer's rollout workers each `POST /reset` (no `env_id`: a new instance is made and its id
returned; with one: that instance is reset), then `POST /step` with that id, and
`POST /close` when done. Bodies are JSON of the trace model's `Action` and `Observation`, so a
remote step returns exactly what a local one does. `HttpEnv` implements `Env` over these calls,
so policies, recorders, replays and `check_env` drive a remote simulator like a local one.

Errors keep their kind across the wire: an unknown task is 404 (`UnknownTaskError`), an action
the env refuses or a step before reset is 422/409 (`InvalidActionError` / `EnvError`), an
unknown instance id is 404 (`EnvError`); one that was closed or expired is 410 (`EnvError`, saying
which and that `reset()` without an id makes a new one: never a silent restart).

Every request passes `serve.guard` first (Host/Origin allow-lists, the optional bearer tokens,
request and response size limits). An instance belongs to the token that made it: with several
tokens one client's ids are unknown (404) to another's. Instances are capped (`max_instances`,
429 past it) and an instance unused for `idle_timeout` seconds is closed and its room freed;
`POST /close` closes one now (a second close, or another client's id, is an error); `GET /info`
counts the open, idle, expired and closed ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import anyio
import httpx
from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from worldsmith.envs.base import (
    Env,
    EnvError,
    InvalidActionError,
    Step,
    UnknownTaskError,
)
from worldsmith.serve.commands import DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_SESSIONS
from worldsmith.serve.guard import TOKEN_ENV, GuardMiddleware, ServeSecurity, credential_of
from worldsmith.serve.lifetimes import EndedSessions, Ending
from worldsmith.serve.memory_release import trim_memory
from worldsmith.traces.model import Action, Observation

__all__ = ["HttpEnv", "ResetRequest", "ResetResponse", "StepRequest", "StepResponse", "build_env_app"]

_LOG = logging.getLogger(__name__)


class ResetRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str | None = Field(default=None, description="Reset this instance; None: make a new one.")
    task: str | None = None
    seed: int | None = None


class ResetResponse(BaseModel):
    env_id: str
    observation: Observation
    info: dict[str, Any]


class StepRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str
    action: Action | str


class StepResponse(BaseModel):
    observation: Observation
    reward: float
    terminated: bool
    truncated: bool
    info: dict[str, Any]


class EnvRef(BaseModel):
    model_config = ConfigDict(extra="forbid")

    env_id: str


class _Instance:
    def __init__(self, env: Env, now: float, owner: str | None) -> None:
        self.env = env
        self.owner = owner
        self.lock = threading.Lock()
        self.last_used = now
        self.in_use = 0


class _Instances:
    """The open env instances of one app, keyed by id; at most `limit` at a time, closed after `idle_timeout`."""

    def __init__(
        self,
        make_env: Callable[[], Env],
        limit: int,
        idle_timeout: float | None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._make_env = make_env
        self._limit = limit
        self.idle_timeout = idle_timeout
        self._clock = clock
        self._held: dict[str, _Instance] = {}
        self._ended = EndedSessions()
        self._lock = threading.Lock()
        self.expired = 0
        self.closed = 0

    def __len__(self) -> int:
        return len(self._held)

    def open(self, owner: str | None) -> str:
        """Make a new instance for `owner` (the request's credential) and return its id (429 when `limit` are
        open after expiring idle ones)."""
        if len(self._held) >= self._limit:
            self.sweep()
        with self._lock:
            if len(self._held) >= self._limit:
                raise HTTPException(
                    429,
                    {
                        "error": "EnvError",
                        "message": f"{self._limit} instances are open; "
                        "close some first"
                        + (f" (idle ones close after {self.idle_timeout:g}s)" if self.idle_timeout else ""),
                    },
                )
            env_id = uuid.uuid4().hex
            self._held[env_id] = _Instance(self._make_env(), self._clock(), owner)
        return env_id

    def _missing(self, env_id: str, owner: str | None) -> HTTPException:
        """410 for `owner`'s instance that was closed or expired, else 404 (never made, or another client's)."""
        ending = self._ended.get((owner, env_id))
        if ending is not None:
            message = ending.reason("env instance", env_id, "reset() without an env_id makes a new one")
            return HTTPException(410, {"error": "EnvError", "message": message})
        return HTTPException(404, {"error": "EnvError", "message": f"no env instance {env_id!r} here for you"})

    @contextlib.contextmanager
    def use(self, env_id: str, owner: str | None) -> Iterator[_Instance]:
        """`owner`'s instance, locked for one call; not expired while in use, its idle time restarted after."""
        with self._lock:
            found = self._held.get(env_id)
            if found is None or found.owner != owner:
                raise self._missing(env_id, owner)
            found.in_use += 1
        try:
            with found.lock:
                yield found
        finally:
            with self._lock:
                found.in_use -= 1
                found.last_used = self._clock()

    def pop(self, env_id: str, owner: str | None) -> _Instance:
        """Take `owner`'s instance out to close it (remembered as closed); 410/404 as `use`."""
        with self._lock:
            found = self._held.get(env_id)
            if found is None or found.owner != owner:
                raise self._missing(env_id, owner)
            del self._held[env_id]
            self._ended.record((owner, env_id), Ending(how="closed"))
            self.closed += 1
            return found

    def sweep(self) -> int:
        """Close the instances idle for longer than `idle_timeout`; how many were closed."""
        if self.idle_timeout is None:
            return 0
        deadline = self._clock() - self.idle_timeout
        with self._lock:
            stale = [key for key, held in self._held.items() if held.in_use == 0 and held.last_used < deadline]
            gone = [self._held.pop(key) for key in stale]
            for key, held in zip(stale, gone, strict=True):
                self._ended.record((held.owner, key), Ending(how="expired", idle_s=self.idle_timeout))
            self.expired += len(gone)
        for held in gone:
            _close_quietly(held)
        if gone:
            trim_memory(min_interval=0.0)
        return len(gone)

    def counts(self) -> dict[str, int]:
        """Open instances, the idle ones among them (no call for a minute, or half the timeout), expired, closed."""
        idle_after = min(60.0, self.idle_timeout / 2) if self.idle_timeout else 60.0
        now = self._clock()
        with self._lock:
            idle = sum(1 for held in self._held.values() if held.in_use == 0 and now - held.last_used >= idle_after)
            return {"open": len(self._held), "idle": idle, "expired": self.expired, "closed": self.closed}

    def close_all(self) -> None:
        with self._lock:
            gone = list(self._held.values())
            self.closed += len(gone)
            self._held.clear()
        for held in gone:
            _close_quietly(held)


def _close_quietly(held: _Instance) -> None:
    """Close an instance nobody will use again; an env that fails to close must not stop the sweep."""
    with held.lock:
        try:
            held.env.close()
        except Exception as error:  # noqa: BLE001 - logged, and the other instances still close
            _LOG.warning("closing an env instance failed: %s: %s", type(error).__name__, error)


def _refusal(error: Exception) -> HTTPException:
    """The HTTP error an env's exception travels as, so the client raises the same kind (module docstring)."""
    if isinstance(error, UnknownTaskError):
        return HTTPException(404, {"error": "UnknownTaskError", "message": str(error)})
    if isinstance(error, InvalidActionError):
        return HTTPException(422, {"error": "InvalidActionError", "message": str(error)})
    return HTTPException(409, {"error": "EnvError", "message": f"{type(error).__name__}: {error}"})


def build_env_app(
    make_env: Callable[[], Env],
    *,
    name: str | None = None,
    max_instances: int = DEFAULT_MAX_SESSIONS,
    idle_timeout: float | None = DEFAULT_IDLE_TIMEOUT,
    security: ServeSecurity | None = None,
    bind: str | None = None,
) -> FastAPI:
    """A FastAPI app serving instances of `make_env()`, each behind its own lock, keyed by id.

    Instances unused for `idle_timeout` seconds are closed (their room under `max_instances` freed);
    every request passes `security` (default: loopback Host/Origin only, no token, default size
    limits; `bind` is the address the server listens on, allowed as Host when it is a specific one).
    """
    probe = make_env()
    env_name = name or probe.name
    tasks = probe.tasks()
    probe.close()
    instances = _Instances(make_env, max_instances, idle_timeout)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        sweeper = asyncio.create_task(_sweep_forever(instances)) if idle_timeout else None
        try:
            yield
        finally:
            if sweeper is not None:
                sweeper.cancel()
            await anyio.to_thread.run_sync(instances.close_all)

    app = FastAPI(title=f"worldsmith env: {env_name}", lifespan=lifespan)
    app.add_middleware(GuardMiddleware, security=security or ServeSecurity(), bind=bind)

    @app.get("/info")
    def info() -> dict[str, Any]:
        instances.sweep()
        return {
            "name": env_name,
            "tasks": len(tasks),
            "instances": len(instances),
            **instances.counts(),
            "max_instances": max_instances,
            "idle_timeout_s": idle_timeout,
        }

    @app.get("/tasks")
    def list_tasks() -> list[str]:
        return tasks

    @app.post("/reset")
    def reset(request: ResetRequest, http: Request) -> ResetResponse:
        owner = credential_of(http.scope)
        env_id = instances.open(owner) if request.env_id is None else request.env_id
        with instances.use(env_id, owner) as held:
            try:
                observation, details = held.env.reset(request.task, seed=request.seed)
            except (EnvError, RuntimeError, ValueError) as error:
                raise _refusal(error) from None
        return ResetResponse(env_id=env_id, observation=observation, info=details)

    @app.post("/step")
    def step(request: StepRequest, http: Request) -> StepResponse:
        with instances.use(request.env_id, credential_of(http.scope)) as held:
            try:
                result = held.env.step(request.action)
            except (EnvError, RuntimeError, ValueError) as error:
                raise _refusal(error) from None
        return StepResponse(
            observation=result.observation,
            reward=result.reward,
            terminated=result.terminated,
            truncated=result.truncated,
            info=result.info,
        )

    @app.post("/admissible_actions")
    def admissible(request: EnvRef, http: Request) -> list[str] | None:
        with instances.use(request.env_id, credential_of(http.scope)) as held:
            return held.env.admissible_actions()

    @app.post("/expert_action")
    def expert(request: EnvRef, http: Request) -> Action | None:
        with instances.use(request.env_id, credential_of(http.scope)) as held:
            try:
                return held.env.expert_action()
            except NotImplementedError as error:
                raise HTTPException(501, {"error": "NotImplementedError", "message": str(error)}) from None

    @app.post("/state")
    def state(request: EnvRef, http: Request) -> dict[str, Any] | None:
        with instances.use(request.env_id, credential_of(http.scope)) as held:
            return held.env.state()

    @app.post("/close")
    def close(request: EnvRef, http: Request) -> dict[str, bool]:
        """Close the instance now (its env's resources freed); closing it again is 410, another's 404."""
        held = instances.pop(request.env_id, credential_of(http.scope))
        with held.lock:
            held.env.close()
        trim_memory()
        return {"closed": True}

    return app


async def _sweep_forever(instances: _Instances) -> None:
    """Expire idle instances a few times per timeout (at most every 30 s), off the event loop."""
    interval = min(30.0, max(0.05, (instances.idle_timeout or 30.0) / 4))
    while True:
        await asyncio.sleep(interval)
        await anyio.to_thread.run_sync(instances.sweep)


_ERRORS: dict[str, type[Exception]] = {
    "UnknownTaskError": UnknownTaskError,
    "InvalidActionError": InvalidActionError,
    "NotImplementedError": NotImplementedError,
}


class HttpEnv:
    """`Env` over a `worldsmith serve --http` server: one remote instance, made at the first reset."""

    def __init__(
        self, url: str, *, timeout: float = 60.0, client: httpx.Client | None = None, token: str | None = None
    ) -> None:
        """`token`: the server's bearer token (default: $WORLDSMITH_TOKEN, if set)."""
        self.url = url.rstrip("/")
        token = token if token is not None else os.environ.get(TOKEN_ENV) or None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        if client is not None:
            client.headers.update(headers)
        self._client = client or httpx.Client(base_url=self.url, timeout=timeout, headers=headers)
        self._own_client = client is None
        self.env_id: str | None = None
        self.name = str(self._call("GET", "/info")["name"])

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        try:
            response = self._client.request(method, path, json=body)
        except httpx.HTTPError as error:
            raise EnvError(f"{self.url}{path}: {error}") from None
        if response.is_success:
            return response.json()
        try:
            detail = response.json().get("detail")
        except ValueError:
            detail = response.text
        if isinstance(detail, dict) and "error" in detail:
            raise _ERRORS.get(detail["error"], EnvError)(detail.get("message", ""))
        raise EnvError(f"{self.url}{path}: HTTP {response.status_code}: {detail}")

    def _require(self) -> str:
        if self.env_id is None:
            raise EnvError(f"{self.name}: reset() before using the environment")
        return self.env_id

    def tasks(self) -> list[str]:
        return list(self._call("GET", "/tasks"))

    def reset(self, task: str | None = None, *, seed: int | None = None) -> tuple[Observation, dict[str, Any]]:
        reply = ResetResponse.model_validate(
            self._call("POST", "/reset", {"env_id": self.env_id, "task": task, "seed": seed})
        )
        self.env_id = reply.env_id
        return reply.observation, reply.info

    def step(self, action: Action | str) -> Step:
        payload = action.model_dump(mode="json") if isinstance(action, Action) else action
        reply = StepResponse.model_validate(self._call("POST", "/step", {"env_id": self._require(), "action": payload}))
        return Step(reply.observation, reply.reward, reply.terminated, reply.truncated, reply.info)

    def admissible_actions(self) -> list[str] | None:
        return self._call("POST", "/admissible_actions", {"env_id": self._require()})

    def expert_action(self) -> Action | None:
        found = self._call("POST", "/expert_action", {"env_id": self._require()})
        return Action.model_validate(found) if found is not None else None

    def state(self) -> dict[str, Any] | None:
        return self._call("POST", "/state", {"env_id": self._require()})

    def close(self) -> None:
        """Close the remote instance (once) and the connection; safe to call twice."""
        if self.env_id is not None:
            env_id, self.env_id = self.env_id, None
            try:
                self._call("POST", "/close", {"env_id": env_id})
            except EnvError:
                pass  # expired there already, or the server is gone: nothing left to close
        if self._own_client:
            self._client.close()

    def __enter__(self) -> HttpEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
