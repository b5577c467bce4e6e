"""Simulation sessions: a directory a person can reopen, fork at any turn and compare.

    <dir>/session.sqlite   meta, turns(idx, action, prediction, state, revision), memory
    <dir>/state.json       readable mirror: the latest state and revision
    <dir>/audit.jsonl      readable mirror: one line per committed turn (action, observation, audit)

SQLite is the truth. A commit is one transaction that checks the revision the caller last saw
(optimistic concurrency: a stale writer gets `StaleSessionError`, nothing is written), stores the
turn, its state and its episodic memory together, and bumps the revision. The mirrors are then
rewritten atomically (temp file, rename) under a lock file; a process killed anywhere in between
leaves SQLite either before or after the commit, and `Session.open` rewrites mirrors that do not
match it.
"""

from __future__ import annotations

import contextlib
import fcntl
import shutil
import sqlite3
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from worldsmith.envs.base import InvalidActionError, as_action
from worldsmith.sim.base import Prediction, WorldModel, action_line, episode_prefix
from worldsmith.sim.prompts import PREAMBLE_METADATA, prefix_before
from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.util.atomic import atomic_write_bytes, atomic_write_json
from worldsmith.util.dirs import publish_dir
from worldsmith.util.errors import ConflictError, NotFoundError, WorldsmithError
from worldsmith.util.names import typed_name

__all__ = [
    "AUDIT_FILE",
    "SESSION_DB",
    "SESSION_FORMAT",
    "STATE_FILE",
    "MemoryItem",
    "Session",
    "SessionError",
    "SessionExistsError",
    "SessionNotFoundError",
    "SessionTurn",
    "StaleSessionError",
    "TurnRecord",
    "find_sessions",
    "fork_directory",
    "new_session_name",
    "session_name",
    "state_differences",
]

SESSION_DB = "session.sqlite"
STATE_FILE = "state.json"
AUDIT_FILE = "audit.jsonl"
LOCK_FILE = ".lock"
SESSION_FORMAT = "worldsmith.session/v1"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS turns (
    idx INTEGER PRIMARY KEY, action TEXT NOT NULL, prediction TEXT NOT NULL, state TEXT NOT NULL,
    revision INTEGER NOT NULL, created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS memory (
    id INTEGER PRIMARY KEY AUTOINCREMENT, turn INTEGER, kind TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL
);
"""


class SessionError(WorldsmithError, RuntimeError):
    """A session cannot be read or written as asked."""


class SessionNotFoundError(NotFoundError, SessionError):
    """No session in this directory."""


class SessionExistsError(ConflictError, SessionError):
    """`create` was pointed at a directory that already holds something."""


class StaleSessionError(ConflictError, SessionError):
    """The session moved on since the caller read it: its commit was refused and nothing was written."""

    def __init__(self, directory: Path, expected: int, actual: int) -> None:
        super().__init__(f"session {directory}: expected revision {expected}, but it is at {actual}; "
                         "reload the session and try again")
        self.expected = expected
        self.actual = actual


class MemoryItem(BaseModel):
    """One episodic-memory entry (what a world model wants to recall later), committed with its turn."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(min_length=1)
    key: str
    value: Any = None
    turn: int | None = None


class TurnRecord(BaseModel):
    """What a commit adds: the action, the accepted prediction, the state after it, new memory."""

    model_config = ConfigDict(extra="forbid")

    action: Action
    prediction: Prediction
    state: dict[str, Any] | None = Field(
        default=None, description="None: the prediction's state, else the state before (unchanged).")
    memory: list[MemoryItem] = Field(default_factory=list)


class SessionTurn(BaseModel):
    """A committed turn as stored."""

    model_config = ConfigDict(extra="forbid")

    index: int
    action: Action
    prediction: Prediction
    state: dict[str, Any]
    revision: int
    created: float

    def audit_line(self) -> dict[str, Any]:
        """The turn as `audit.jsonl` shows it."""
        prediction = self.prediction
        return {"turn": self.index, "revision": self.revision, "action": action_line(self.action),
                "observation": prediction.observation, "outcome": prediction.outcome,
                "effects": [e.model_dump(mode="json") for e in prediction.effects],
                "audit": prediction.audit.model_dump(mode="json")}


def _dumps(value: Any, what: str) -> str:
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS).decode()
    except TypeError as error:
        raise SessionError(f"{what} is not JSON: {error}") from None


def _flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(_flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    return {prefix: value}


def state_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """Dotted paths whose values differ between two states."""
    flat_a, flat_b = _flatten(a), _flatten(b)
    return sorted(path for path in set(flat_a) | set(flat_b) if flat_a.get(path, ...) != flat_b.get(path, ...))


def find_sessions(folder: str | Path) -> list[Path]:
    """The session directories directly inside `folder` (e.g. `<workspace>/sessions`), by name."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if not p.name.startswith(".") and (p / SESSION_DB).is_file())


def session_name(name: object) -> str:
    """A session name as typed (trimmed), by the one name rule (`util.names.check_name`); else `SessionError`."""
    return typed_name(name, "session", SessionError)


def new_session_name(book: str, now: float | None = None) -> str:
    """The default name of a new session of worldbook `book`: the book and the local time, to the second."""
    return f"{book}-{time.strftime('%Y%m%dT%H%M%S', time.localtime(now))}"


def fork_directory(directory: str | Path, at_turn: int) -> Path:
    """The first free sibling `<name>-fork<at_turn>[-<n>]` of session `directory`, for a fork kept at that turn."""
    directory = Path(directory)
    candidate, number = directory.with_name(f"{directory.name}-fork{at_turn}"), 2
    while candidate.exists():
        candidate, number = directory.with_name(f"{directory.name}-fork{at_turn}-{number}"), number + 1
    return candidate


class Session:
    """A persistent simulation session (see the module docstring); use `create` or `open`."""

    def __init__(self, directory: Path, connection: sqlite3.Connection) -> None:
        self.directory = directory
        self._db = connection

    # -- opening

    @staticmethod
    def exists(directory: str | Path) -> bool:
        return (Path(directory) / SESSION_DB).is_file()

    @staticmethod
    def _connect(path: Path) -> sqlite3.Connection:
        connection = sqlite3.connect(path, isolation_level=None, timeout=30.0)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=FULL")
        return connection

    @classmethod
    def create(cls, directory: str | Path, *, book_ref: str | None = None, model: str | None = None,
               initial_observation: str = "", task: str | None = None, env_id: str | None = None,
               initial_state: dict[str, Any] | None = None, metadata: dict[str, Any] | None = None) -> Session:
        """A new empty session in `directory` (which must not exist or be empty); built aside, then renamed."""
        meta = {"format": SESSION_FORMAT, "created": time.time(), "book_ref": book_ref, "model": model,
                "initial_observation": initial_observation, "task": task, "env_id": env_id,
                "initial_state": initial_state or {}, "metadata": metadata or {}, "parent": None,
                "forked_at": None, "revision": 0}
        return cls._build(Path(directory), meta, turns=[], memory=[])

    @classmethod
    def from_episode(cls, directory: str | Path, episode: Episode, *, book_ref: str | None = None,
                     model: str | None = None, dataset: str | None = None) -> Session:
        """A new session that opens as a recorded episode does: its initial observation, task and environment
        (the episode's id and dataset are kept in the metadata), so a simulation can be set against the record."""
        opening = episode.initial_observation.text if episode.initial_observation is not None else ""
        source = {"episode": episode.id, "dataset": dataset, "turns": len(episode.turns)}
        declared = prefix_before(episode, 0).metadata.get(PREAMBLE_METADATA)  # the log's system prompt, for models
        return cls.create(directory, book_ref=book_ref, model=model, initial_observation=opening, task=episode.task,
                          env_id=episode.env_id, metadata={"from_episode": source,
                                                           **({PREAMBLE_METADATA: declared} if declared else {})})

    @classmethod
    def _build(cls, directory: Path, meta: dict[str, Any], *, turns: list[tuple[Any, ...]],
               memory: list[tuple[Any, ...]]) -> Session:
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise SessionExistsError(f"{directory} already exists and is not an empty directory")
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{directory.name}.", suffix=".tmp", dir=directory.parent))
        try:
            connection = cls._connect(staging / SESSION_DB)
            try:
                connection.executescript(_SCHEMA)
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany("INSERT INTO meta(key, value) VALUES (?, ?)",
                                       [(key, _dumps(value, f"session {key}")) for key, value in meta.items()])
                connection.executemany("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?)", turns)
                connection.executemany("INSERT INTO memory(turn, kind, key, value) VALUES (?, ?, ?, ?)", memory)
                connection.execute("COMMIT")
                connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                connection.close()
            session = cls(staging, cls._connect(staging / SESSION_DB))
            session._write_mirrors()
            session.close()
            if not publish_dir(staging, directory):  # empty (checked above) unless another writer got there
                raise SessionExistsError(f"{directory} already exists and is not an empty directory")
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return cls.open(directory)

    @classmethod
    def open(cls, directory: str | Path) -> Session:
        """An existing session; mirrors that do not match SQLite (a crash after a commit) are rewritten."""
        directory = Path(directory)
        if not cls.exists(directory):
            raise SessionNotFoundError(f"no session in {directory} (no {SESSION_DB})")
        try:
            session = cls(directory, cls._connect(directory / SESSION_DB))
            fmt = session.meta.get("format")
        except sqlite3.DatabaseError as error:
            raise SessionError(f"{directory / SESSION_DB}: not a session database: {error}") from None
        if fmt != SESSION_FORMAT:
            session.close()
            raise SessionError(f"{directory / SESSION_DB}: format {fmt!r}, expected {SESSION_FORMAT!r}")
        if not session.mirrors_current():
            with session._lock():
                session._write_mirrors()
        return session

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- reading

    @property
    def meta(self) -> dict[str, Any]:
        return {key: orjson.loads(value) for key, value in self._db.execute("SELECT key, value FROM meta")}

    @property
    def revision(self) -> int:
        row = self._db.execute("SELECT value FROM meta WHERE key = 'revision'").fetchone()
        return int(orjson.loads(row[0])) if row else 0

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM turns").fetchone()[0])

    def turns(self, start: int = 0, stop: int | None = None) -> list[SessionTurn]:
        """Committed turns with `start <= index < stop`, in order."""
        rows = self._db.execute(
            "SELECT idx, action, prediction, state, revision, created FROM turns WHERE idx >= ? AND idx < ? "
            "ORDER BY idx", (start, stop if stop is not None else 2**62)).fetchall()
        return [self._turn(row) for row in rows]

    def turn(self, index: int) -> SessionTurn:
        found = self.turns(index, index + 1)
        if not found:
            raise SessionError(f"session {self.directory} has no turn {index} (it has {len(self)})")
        return found[0]

    @staticmethod
    def _turn(row: tuple[Any, ...]) -> SessionTurn:
        index, action, prediction, state, revision, created = row
        return SessionTurn(index=index, action=Action.model_validate_json(action),
                           prediction=Prediction.model_validate_json(prediction), state=orjson.loads(state),
                           revision=revision, created=created)

    def state_at(self, turns: int) -> dict[str, Any]:
        """The state after the first `turns` turns (0: the initial state)."""
        if turns <= 0:
            return dict(self.meta.get("initial_state") or {})
        row = self._db.execute("SELECT state FROM turns WHERE idx = ?", (turns - 1,)).fetchone()
        if row is None:
            raise SessionError(f"session {self.directory} has no turn {turns - 1} (it has {len(self)})")
        return orjson.loads(row[0])

    @property
    def state(self) -> dict[str, Any]:
        """The latest committed state."""
        return self.state_at(len(self))

    def memory(self, kind: str | None = None) -> list[MemoryItem]:
        query = "SELECT turn, kind, key, value FROM memory" + (" WHERE kind = ?" if kind else "") + " ORDER BY id"
        return [MemoryItem(turn=turn, kind=k, key=key, value=orjson.loads(value))
                for turn, k, key, value in self._db.execute(query, (kind,) if kind else ())]

    def prefix(self, turns: int | None = None) -> Episode:
        """The opening observation and the first `turns` committed turns (all by default), as `start` takes them."""
        meta = self.meta
        episode = episode_prefix(meta.get("initial_observation") or "", task=meta.get("task"),
                                 env_id=meta.get("env_id"), episode_id=f"session:{self.directory.name}")
        stored = self.turns(0, turns)
        episode.turns = [Turn(index=t.index, id=f"{episode.id}#{t.index}", action=t.action,
                              observation=Observation(text=t.prediction.observation)) for t in stored]
        declared = (meta.get("metadata") or {}).get(PREAMBLE_METADATA)
        if declared:
            episode.metadata = {**episode.metadata, PREAMBLE_METADATA: declared}
        return episode

    # -- writing

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        """Serialises writers of this directory (SQLite transaction plus mirrors); released if the process dies."""
        with open(self.directory / LOCK_FILE, "a+") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle.fileno(), fcntl.LOCK_UN)

    def commit(self, turn: TurnRecord, expected_revision: int) -> SessionTurn:
        """Append `turn` if the session is still at `expected_revision`; returns it as stored.

        Raises `StaleSessionError` (nothing written) when another writer committed first.
        """
        with self._lock():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                current = self.revision
                if current != expected_revision:
                    raise StaleSessionError(self.directory, expected_revision, current)
                index = len(self)
                previous = self.state_at(index)
                state = turn.state if turn.state is not None else (
                    turn.prediction.state if turn.prediction.state is not None else previous)
                created = time.time()
                revision = current + 1
                self._db.execute("INSERT INTO turns VALUES (?, ?, ?, ?, ?, ?)", (
                    index, turn.action.model_dump_json(), turn.prediction.model_dump_json(),
                    _dumps(state, f"turn {index} state"), revision, created))
                self._db.executemany("INSERT INTO memory(turn, kind, key, value) VALUES (?, ?, ?, ?)", [
                    (item.turn if item.turn is not None else index, item.kind, item.key,
                     _dumps(item.value, f"memory {item.kind}:{item.key}")) for item in turn.memory])
                self._db.execute("UPDATE meta SET value = ? WHERE key = 'revision'", (str(revision),))
                self._db.execute("COMMIT")
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            try:
                self._write_mirrors()
            except OSError as error:  # committed all the same: the mirrors are rewritten on the next open
                warnings.warn(f"session {self.directory}: mirrors not written ({error})", stacklevel=2)
        return SessionTurn(index=index, action=turn.action, prediction=turn.prediction, state=state,
                           revision=revision, created=created)

    def play(self, model: WorldModel, action: Action | str | dict[str, Any], *,
             memory: Sequence[MemoryItem] = ()) -> SessionTurn:
        """Predict `action` with `model`, commit it here, then in the model (a refused commit leaves both as they were).

        The model must have been started on this session (`attach`).
        """
        expected = self.revision
        prediction = model.predict(action)
        pending = getattr(model, "pending", None)
        if pending is not None:
            parsed = pending[0]
        else:
            try:
                parsed = as_action(action)
            except InvalidActionError as error:
                parsed = Action(name="", raw=str(action)[:500], parse_error=str(error))
        stored = self.commit(TurnRecord(action=parsed, prediction=prediction, memory=list(memory)), expected)
        model.commit()
        return stored

    def attach(self, model: WorldModel) -> None:
        """Start `model` at the end of this session (its turns as the prefix, its latest state)."""
        model.start(self.prefix(), self.state)

    def fork(self, at_turn: int, new_directory: str | Path | None = None) -> Session:
        """A new session holding this one's first `at_turn` turns (and their memory); the next turn is `at_turn`.

        It goes to `new_directory` (whose name must be a valid session name), by default to the first free
        sibling `<name>-fork<at_turn>[-<n>]` (`fork_directory`).
        """
        count = len(self)
        if not 0 <= at_turn <= count:
            raise SessionError(f"cannot fork {self.directory} at turn {at_turn}: it has {count} turns")
        if new_directory is None:
            new_directory = fork_directory(self.directory, at_turn)
        else:
            session_name(Path(new_directory).name)
        meta = {**self.meta, "created": time.time(), "parent": str(self.directory.resolve()),
                "forked_at": at_turn, "revision": at_turn}
        turns = [(t.index, t.action.model_dump_json(), t.prediction.model_dump_json(), _dumps(t.state, "state"),
                  t.index + 1, t.created) for t in self.turns(0, at_turn)]
        memory = [(item.turn, item.kind, item.key, _dumps(item.value, "memory")) for item in self.memory()
                  if item.turn is None or item.turn < at_turn]
        return self._build(Path(new_directory), meta, turns=turns, memory=memory)

    def compare(self, other: Session) -> list[dict[str, Any]]:
        """Turn by turn: the two actions, observations and outcomes, and the state paths that differ."""
        mine, theirs = self.turns(), other.turns()
        rows = []
        for index in range(max(len(mine), len(theirs))):
            a = mine[index] if index < len(mine) else None
            b = theirs[index] if index < len(theirs) else None
            row: dict[str, Any] = {"turn": index}
            for side, turn in (("a", a), ("b", b)):
                row[f"action_{side}"] = action_line(turn.action) if turn else None
                row[f"observation_{side}"] = turn.prediction.observation if turn else None
                row[f"outcome_{side}"] = turn.prediction.outcome if turn else None
                row[f"route_{side}"] = turn.prediction.audit.route if turn else None
            row["same_action"] = row["action_a"] == row["action_b"]
            row["same_observation"] = row["observation_a"] == row["observation_b"]
            row["state_diff"] = state_differences(a.state, b.state) if a and b else []
            rows.append(row)
        return rows

    # -- mirrors

    def _mirror_values(self) -> tuple[dict[str, Any], bytes]:
        meta = self.meta
        turns = self.turns()
        state = {"format": SESSION_FORMAT, "revision": meta["revision"], "turns": len(turns),
                 "book_ref": meta.get("book_ref"), "model": meta.get("model"),
                 "state": turns[-1].state if turns else meta.get("initial_state") or {}}
        audit = b"".join(orjson.dumps(t.audit_line(), option=orjson.OPT_NON_STR_KEYS) + b"\n" for t in turns)
        return state, audit

    def _write_mirrors(self) -> None:
        state, audit = self._mirror_values()
        atomic_write_bytes(self.directory / AUDIT_FILE, audit)
        atomic_write_json(self.directory / STATE_FILE, state)

    def mirrors_current(self) -> bool:
        """Whether `state.json` and `audit.jsonl` say exactly what SQLite holds."""
        state, audit = self._mirror_values()
        try:
            on_disk = orjson.loads((self.directory / STATE_FILE).read_bytes())
            audit_on_disk = (self.directory / AUDIT_FILE).read_bytes()
        except (OSError, orjson.JSONDecodeError):
            return False
        return on_disk == state and audit_on_disk == audit
