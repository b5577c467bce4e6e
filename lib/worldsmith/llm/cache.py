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

__all__ = ["ResponseCache", "cache_key", "model_identity"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (
    key TEXT PRIMARY KEY,
    spec TEXT NOT NULL,
    created REAL NOT NULL,
    completions TEXT NOT NULL
)
"""


_WEIGHTS = ("config.json", "tokenizer.json", "*.safetensors", "*.bin")


def model_identity(spec: str) -> str:
    """Which weights a local-folder spec (`tiny:PATH`, `hf:PATH`, ...) names now: a digest of its weight files'
    names, sizes and modification times; "" for any other spec. Part of the cache key, so a model retrained into
    the same folder (a dataset's own tiny model, retrained) is never answered with the old model's replies."""
    _, sep, rest = spec.partition(":")
    folder = Path(rest.partition("?")[0]).expanduser() if sep else None
    if folder is None or not folder.is_dir():
        return ""
    stats = sorted((path.name, path.stat().st_size, path.stat().st_mtime_ns)
                   for pattern in _WEIGHTS for path in folder.glob(pattern) if path.is_file())
    return hashlib.sha256(orjson.dumps(stats)).hexdigest()[:16] if stats else ""


def cache_key(spec: str, messages: Sequence[Message], params: GenerationParams, identity: str = "") -> str:
    head = [spec, identity] if identity else [spec]
    body = orjson.dumps([*head, list(messages), params.to_json()], option=orjson.OPT_SORT_KEYS)
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

    def get(self, spec: str, messages: Sequence[Message], params: GenerationParams,
            identity: str = "") -> list[Completion] | None:
        if not self.cacheable(params):
            return None
        row = self._connect().execute(
            "SELECT completions FROM responses WHERE key = ?", (cache_key(spec, messages, params, identity),)
        ).fetchone()
        if row is None:
            return None
        completions = [Completion.from_json(item) for item in orjson.loads(row[0])]
        for completion in completions:
            completion.extra = {**completion.extra, "original_latency_s": completion.latency_s}
            completion.cached, completion.latency_s, completion.cost_usd = True, 0.0, 0.0
        return completions

    def put(self, spec: str, messages: Sequence[Message], params: GenerationParams,
            completions: list[Completion], identity: str = "") -> None:
        if not self.cacheable(params):
            return
        payload = orjson.dumps([completion.to_json() for completion in completions]).decode()
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute(
                "INSERT OR REPLACE INTO responses (key, spec, created, completions) VALUES (?, ?, ?, ?)",
                (cache_key(spec, messages, params, identity), spec, time.time(), payload),
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
