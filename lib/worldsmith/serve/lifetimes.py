"""How served sessions ended, remembered so a client that comes back is told rather than silently restarted.

Both servers hand out handles (an MCP session's handle or name, an env instance's id). When one is
closed (by its client) or expires (unused for the idle timeout), the server keeps a small record of
that under the same (owner, handle) key, so the next call with it fails with the reason, "session
'h' expired after 600 s idle; start a new one", instead of opening a fresh episode under the old
name. The record is tiny and the newest `limit` are kept (older handles then read as unknown).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["DEFAULT_ENDED_LIMIT", "EndedSessions", "Ending", "SessionEndedError"]

DEFAULT_ENDED_LIMIT = 65_536
"""How many ended sessions a server remembers (a few hundred bytes each)."""


class Ending(BaseModel):
    """How one session ended: closed by its client, or expired after `idle_s` seconds unused."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    how: Literal["closed", "expired"]
    idle_s: float | None = None

    def reason(self, what: str, handle: str, restart: str) -> str:
        """The sentence a client sees, e.g. "session 'h' expired after 600 s idle; start a new one"."""
        if self.how == "expired":
            return f"{what} {handle!r} expired after {self.idle_s or 0:g} s idle; {restart}"
        return f"{what} {handle!r} was closed already; {restart}"


class SessionEndedError(LookupError):
    """A call named a session that was closed or expired (its `ending` says which)."""

    def __init__(self, message: str, ending: Ending) -> None:
        super().__init__(message)
        self.ending = ending


class EndedSessions:
    """The newest `limit` ended sessions by key (thread-safe)."""

    def __init__(self, limit: int = DEFAULT_ENDED_LIMIT) -> None:
        self.limit = limit
        self._ended: OrderedDict[Hashable, Ending] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._ended)

    def record(self, key: Hashable, ending: Ending) -> None:
        with self._lock:
            self._ended[key] = ending
            self._ended.move_to_end(key)
            while len(self._ended) > self.limit:
                self._ended.popitem(last=False)

    def get(self, key: Hashable) -> Ending | None:
        with self._lock:
            return self._ended.get(key)
