"""A response cache in SQLite, so reruns of a build or an evaluation cost no model calls.

The key is a digest of everything that determines the output: backend, model, messages and
generation parameters (seed included). Sampling without a seed is not reproducible, so such
calls are not cached unless `cache_unseeded=True` (then a rerun returns the same sample).
Writes are transactions: a crash never leaves a half-written entry.
"""

from __future__ import annotations

import hashlib
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson

from worldsmith.llm.base import Completion, GenerationParams, Message

__all__ = ["ResponseCache", "cache_key"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created REAL NOT NULL,
    completions TEXT NOT NULL
)
"""


def cache_key(spec: str, messages: Sequence[Message], params: GenerationParams) -> str:
    body = orjson.dumps([spec, list(messages), params.to_json()], option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(body).hexdigest()


class ResponseCache:
    """`get`/`put` completions by (spec, messages, params); safe across threads and processes."""

    def __init__(self, path: str | Path, *, cache_unseeded: bool = False) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cache_unseeded = cache_unseeded
        self._local = threading.local()
        with self._connect() as conn:
            conn.execute(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            self._local.conn = conn
        return conn

    def cacheable(self, params: GenerationParams) -> bool:
        return params.greedy or params.seed is not None or self.cache_unseeded

    def get(self, spec: str, messages: Sequence[Message], params: GenerationParams) -> list[Completion] | None:
        if not self.cacheable(params):
            return None
        row = self._connect().execute(
            "SELECT completions FROM responses WHERE key = ?", (cache_key(spec, messages, params),)
        ).fetchone()
        if row is None:
            return None
        completions = [Completion.from_json(item) for item in orjson.loads(row[0])]
        for completion in completions:
            completion.extra = {**completion.extra, "original_latency_s": completion.latency_s}
            completion.cached, completion.latency_s, completion.cost_usd = True, 0.0, 0.0
        return completions

    def put(self, spec: str, messages: Sequence[Message], params: GenerationParams,
            completions: list[Completion]) -> None:
        if not self.cacheable(params):
            return
        payload = orjson.dumps([completion.to_json() for completion in completions]).decode()
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, spec, created, completions) VALUES (?, ?, ?, ?)",
                (cache_key(spec, messages, params), spec, time.time(), payload),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def stats(self) -> dict[str, Any]:
        count, specs = self._connect().execute("SELECT count(*), count(DISTINCT spec) FROM responses").fetchone()
        return {"entries": count, "models": specs, "path": str(self.path)}

    def clear(self, spec: str | None = None) -> int:
        conn = self._connect()
        cursor = conn.execute("DELETE FROM responses" + (" WHERE spec = ?" if spec else ""), (spec,) if spec else ())
        return cursor.rowcount

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
