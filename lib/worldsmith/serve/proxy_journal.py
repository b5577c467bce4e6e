"""What `worldsmith proxy` records, durable call by call: one journal file per MCP session, one episode at its end.

A session's journal (`<workspace>/runs/proxy/<dataset>/journal/<session>.jsonl`) opens with a header line (the
upstream's declared tool schemas, the proxy run, the session, the upstream) and gets one line per answered call
(tool, arguments, answer text, whether it was an error, when and how long), each appended and `fsync`ed before
the answer goes back to the client: a proxy killed at any moment loses at most the call in flight. When the
session ends its journal becomes one `Episode` in the dataset (`Workspace.add_episodes`) and is removed; a
journal still there when a proxy starts (the last one was killed) is stored the same way, marked
`metadata["partial"]`, by `recover_journals` (a journal another live proxy holds, locked, is left alone).

The episode's environment id is the upstream's declared tool set (`tool_set_env_id`), so every recording of one
server lands in one environment. Everything recorded passes `redact` (identity by default) before it is written:
the seam where recorded text is cleaned before anything reaches the disk.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
from pydantic import BaseModel, ConfigDict, Field

from worldsmith.traces.model import Action, Episode, Observation, Turn
from worldsmith.util.errors import BadInputError
from worldsmith.workspace import Workspace, tool_set_env_id

__all__ = [
    "JOURNAL_FORMAT",
    "CallRecord",
    "Redactor",
    "SessionJournal",
    "SessionOrigin",
    "journal_dir",
    "journal_episode",
    "no_redaction",
    "recover_journals",
]

JOURNAL_FORMAT = "worldsmith-proxy-journal/1"
Redactor = Callable[[str], str]
"""Applied to every recorded text (answers, string arguments) before it is written."""


def no_redaction(text: str) -> str:
    return text


class SessionOrigin(BaseModel):
    """Whose session a journal holds: its provenance, and the upstream's tools as the upstream declared them."""

    model_config = ConfigDict(extra="forbid")

    session: str = Field(min_length=1)
    run: str = Field(min_length=1, description="The proxy run (one process) that recorded it.")
    upstream: str = Field(description="The upstream: its command line or URL.")
    mode: str = "record"
    tools: list[dict[str, Any]] = Field(description="`tools/list` of the upstream: name, description, input_schema.")
    started: float


class CallRecord(BaseModel):
    """One forwarded call and the upstream's answer (`error`: the call failed; `protocol_error`: as a JSON-RPC
    error, with `code`, rather than as a tool result with isError)."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    arguments: Any = Field(default_factory=dict)
    text: str
    error: bool = False
    protocol_error: bool = False
    code: int | None = None
    started: float
    latency_s: float = Field(ge=0.0)


def journal_dir(workspace: Workspace, dataset: str) -> Path:
    return workspace.layout.run_dir("proxy", dataset) / "journal"


def _redacted(value: Any, redact: Redactor) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: _redacted(item, redact) for key, item in value.items()}
    if isinstance(value, list):
        return [_redacted(item, redact) for item in value]
    return value


def _append(handle: Any, line: dict[str, Any]) -> None:
    handle.write(orjson.dumps(line) + b"\n")
    handle.flush()
    os.fsync(handle.fileno())


class SessionJournal:
    """The journal of one session: `record` appends (and syncs) a call; `finish` stores the episode and removes it."""

    def __init__(self, folder: Path, origin: SessionOrigin, *, redact: Redactor = no_redaction) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{origin.session}.jsonl"
        self.origin = origin
        self.redact = redact
        self.calls = 0
        self._handle = open(self.path, "xb")  # noqa: SIM115 - held open for the session's appends
        fcntl.flock(self._handle.fileno(), fcntl.LOCK_EX)  # a live journal: no other proxy's recovery takes it
        _append(self._handle, {"format": JOURNAL_FORMAT, **origin.model_dump(mode="json")})
        _sync_folder(folder)

    def record(self, call: CallRecord) -> None:
        redacted = call.model_copy(update={"arguments": _redacted(call.arguments, self.redact),
                                           "text": self.redact(call.text)})
        _append(self._handle, redacted.model_dump(mode="json"))
        self.calls += 1

    def close(self) -> None:
        if not self._handle.closed:
            self._handle.close()

    def finish(self, workspace: Workspace, dataset: str) -> Episode | None:
        """Store the session as an episode of `dataset` and remove the journal; None (journal removed) when the
        session made no call."""
        self.close()
        return _store(self.path, workspace, dataset, partial=False)


def _sync_folder(folder: Path) -> None:
    """The new file's name is durable too (a journal that vanished with its folder entry would lose its calls)."""
    descriptor = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """The journal's complete lines; a last line cut off by a kill is the call in flight, and is dropped."""
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = lines[:-1]  # what follows the last newline was never synced as a whole line
    for number, raw in enumerate(complete, start=1):
        if not raw.strip():
            continue
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError as error:
            raise BadInputError(f"{path}:{number}: not a journal line ({error})") from None
        if not isinstance(value, dict):
            raise BadInputError(f"{path}:{number}: a journal line is a JSON object")
        yield number, value


def journal_episode(path: Path, *, partial: bool) -> Episode | None:
    """The episode a journal holds (None: it holds no call); `BadInputError` naming the file and line when it is
    not a journal."""
    lines = list(_lines(path))
    if not lines or lines[0][1].get("format") != JOURNAL_FORMAT:
        raise BadInputError(f"{path}:1: not a worldsmith proxy journal (no {JOURNAL_FORMAT!r} header)")
    header = dict(lines[0][1])
    header.pop("format")
    try:
        origin = SessionOrigin.model_validate(header)
        calls = [CallRecord.model_validate(line) for _, line in lines[1:]]
    except ValueError as error:
        raise BadInputError(f"{path}: not a valid journal: {error}") from None
    if not calls:
        return None
    turns = [
        Turn(index=index, action=Action(name=call.tool, arguments=call.arguments),
             observation=Observation(text=call.text),
             info={"error": call.error, "protocol_error": call.protocol_error, "code": call.code,
                   "started": call.started, "latency_s": call.latency_s})
        for index, call in enumerate(calls)
    ]
    names = [tool.get("name", "") for tool in origin.tools]
    return Episode(
        id=f"mcp-{origin.run}-{origin.session}",
        env_id=tool_set_env_id(names),
        initial_observation=Observation(text=""),
        turns=turns,
        metadata={"tools": origin.tools, "partial": partial,
                  "proxy": {"run": origin.run, "session": origin.session, "upstream": origin.upstream,
                            "mode": origin.mode, "started": origin.started, "stored": time.time()}},
    )


def _store(path: Path, workspace: Workspace, dataset: str, *, partial: bool) -> Episode | None:
    episode = journal_episode(path, partial=partial)
    if episode is not None:
        workspace.add_episodes(dataset, [episode], label=f"proxy-{episode.id}")
    path.unlink()
    return episode


def recover_journals(workspace: Workspace, dataset: str) -> list[Episode]:
    """Store the journals a killed proxy left behind as partial episodes of `dataset` (and remove them)."""
    folder = journal_dir(workspace, dataset)
    stored = []
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        with open(path, "rb") as handle:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # a running proxy's session
                continue
            episode = _store(path, workspace, dataset, partial=True)
        if episode is not None:
            stored.append(episode)
    return stored
