"""The call log: every model call with its prompt, output, usage, latency and the component that asked.

One SQLite file per workspace (`<workspace>/llm/calls.sqlite`), calls grouped by run id, with a
full-text index (FTS5) over prompts and outputs so the workbench can search thousands of calls.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from worldsmith.llm.base import Completion, GenerationParams, Message

__all__ = ["CallLog", "CallRecord", "call_log_path"]


def call_log_path(workspace_root: str | Path) -> Path:
    """Where a workspace's call log lives: `<workspace>/llm/calls.sqlite`."""
    return Path(workspace_root) / "llm" / "calls.sqlite"

_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS calls (
        id INTEGER PRIMARY KEY,
        run TEXT NOT NULL,
        component TEXT NOT NULL,
        spec TEXT NOT NULL,
        created REAL NOT NULL,
        messages TEXT NOT NULL,
        params TEXT NOT NULL,
        outputs TEXT NOT NULL,
        prompt_tokens INTEGER NOT NULL DEFAULT 0,
        completion_tokens INTEGER NOT NULL DEFAULT 0,
        cached_tokens INTEGER NOT NULL DEFAULT 0,
        latency_s REAL NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        from_cache INTEGER NOT NULL DEFAULT 0,
        error TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS calls_run ON calls (run, id)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS calls_text USING fts5(prompt, output, content='')",
]


@dataclass
class CallRecord:
    id: int
    run: str
    component: str
    spec: str
    created: float
    messages: list[Message]
    params: dict[str, Any]
    outputs: list[dict[str, Any]]
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    latency_s: float
    cost_usd: float
    from_cache: bool
    error: str | None

    @property
    def output_text(self) -> str:
        return "\n---\n".join(str(output.get("text", "")) for output in self.outputs)


def _prompt_text(messages: Sequence[Message]) -> str:
    return "\n".join(f"{m.get('role')}: {m.get('content')}" for m in messages)


class CallLog:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        conn = self._connect()
        for statement in _SCHEMA:
            conn.execute(statement)

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            self._local.conn = conn
        return conn

    def record(
        self,
        *,
        run: str,
        component: str,
        spec: str,
        messages: Sequence[Message],
        params: GenerationParams,
        completions: Sequence[Completion] = (),
        error: str | None = None,
    ) -> int:
        """Store one call (a transaction: the row and its search entry land together)."""
        outputs = [completion.to_json() for completion in completions]
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        try:
            cursor = conn.execute(
                "INSERT INTO calls (run, component, spec, created, messages, params, outputs, prompt_tokens, "
                "completion_tokens, cached_tokens, latency_s, cost_usd, from_cache, error) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    run, component, spec, time.time(), orjson.dumps(list(messages)).decode(),
                    orjson.dumps(params.to_json()).decode(), orjson.dumps(outputs).decode(),
                    max((c.prompt_tokens for c in completions), default=0),
                    sum(c.completion_tokens for c in completions),
                    max((c.cached_tokens for c in completions), default=0),
                    max((c.latency_s for c in completions), default=0.0),
                    sum(c.cost_usd for c in completions),
                    int(bool(completions) and all(c.cached for c in completions)), error,
                ),
            )
            row_id = int(cursor.lastrowid or 0)
            conn.execute(
                "INSERT INTO calls_text (rowid, prompt, output) VALUES (?, ?, ?)",
                (row_id, _prompt_text(messages), "\n".join(c.text for c in completions) or (error or "")),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return row_id

    def runs(self) -> list[dict[str, Any]]:
        """Per run: calls, tokens, latency, cost, cache hits, errors (newest first)."""
        rows = self._connect().execute(
            "SELECT run, count(*), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens), sum(latency_s), "
            "sum(cost_usd), sum(from_cache), count(error), min(created), max(created) FROM calls "
            "GROUP BY run ORDER BY max(created) DESC"
        ).fetchall()
        keys = ("run", "calls", "prompt_tokens", "completion_tokens", "cached_tokens", "latency_s", "cost_usd",
                "cache_hits", "errors", "first", "last")
        return [dict(zip(keys, row, strict=True)) for row in rows]

    def calls(self, *, run: str | None = None, search: str | None = None, component: str | None = None,
              limit: int = 50, offset: int = 0) -> list[CallRecord]:
        clauses, params = [], []
        if run:
            clauses.append("c.run = ?")
            params.append(run)
        if component:
            clauses.append("c.component = ?")
            params.append(component)
        source = "calls c"
        if search and search.strip():
            source = "calls c JOIN calls_text t ON t.rowid = c.id"
            clauses.append("calls_text MATCH ?")
            params.append(_fts_query(search))
        where = f" WHERE {' AND '.join(clauses)}" if clauses else ""
        rows = self._connect().execute(
            f"SELECT c.* FROM {source}{where} ORDER BY c.id DESC LIMIT ? OFFSET ?", [*params, limit, offset]
        ).fetchall()
        return [_record(row) for row in rows]

    def count(self, *, run: str | None = None) -> int:
        sql, params = "SELECT count(*) FROM calls", []
        if run:
            sql, params = sql + " WHERE run = ?", [run]
        return int(self._connect().execute(sql, params).fetchone()[0])

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _fts_query(text: str) -> str:
    """User text as an FTS5 query of quoted terms (no FTS syntax errors from arbitrary input)."""
    terms = [term.replace('"', '""') for term in text.split()]
    return " ".join(f'"{term}"' for term in terms)


def _record(row: tuple[Any, ...]) -> CallRecord:
    (id_, run, component, spec, created, messages, params, outputs, prompt_tokens, completion_tokens, cached_tokens,
     latency_s, cost_usd, from_cache, error) = row
    return CallRecord(id_, run, component, spec, created, orjson.loads(messages), orjson.loads(params),
                      orjson.loads(outputs), prompt_tokens, completion_tokens, cached_tokens, latency_s, cost_usd,
                      bool(from_cache), error)
