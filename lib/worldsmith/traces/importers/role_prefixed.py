"""Role-prefixed text traces: lines starting `User:`, `Action:`, `Observation:` (and friends).

    Task: Manage the ledger.            (optional: the episode's task)
    User: Add twenty dollars.
    Action: {"type":"deposit","arguments":{"amount":20}}
    Observation: Deposited 20. Balance: 120.0

A line without a known prefix continues the previous entry (multi-line observations). An
`Observation:` before the first action is the initial observation. `Episode: <id>` starts a
new episode; without it the file is one episode named after the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from worldsmith.traces.actions import action_from_text
from worldsmith.traces.import_report import Reject
from worldsmith.traces.importers.base import ReadItem, skip_rest_of_line
from worldsmith.traces.limits import import_limits
from worldsmith.traces.model import (
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    content_digest,
)

__all__ = ["RolePrefixedImporter"]

_CONTEXT_ROLES = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "thought": "reasoning",
    "agent": "assistant",
    "human": "user",
}
_ROLES = {"action", "observation", "task", "instruction", "episode", *_CONTEXT_ROLES}
_PREFIX = re.compile(r"^(?P<role>[A-Za-z]+):(?: |$)")
_RAW_HEAD = 64 << 10  # what the quarantine keeps of a line too long to read


@dataclass(slots=True)
class _Entry:
    role: str
    text: str
    line: int
    more: list[str] = field(default_factory=list)  # continuation lines, joined once: `+=` on an attribute copies

    def full_text(self) -> str:
        return "\n".join([self.text, *self.more]) if self.more else self.text


@dataclass(slots=True)
class _EpisodeBuilder:
    episode_id: str
    line: int
    task: str | None = None
    initial: Observation | None = None
    turns: list[Turn] = field(default_factory=list)
    context: list[ContextEvent] = field(default_factory=list)
    pending: _Entry | None = None


class RolePrefixedImporter:
    name = "role_prefixed"
    description = "Role-prefixed text lines (User: / Action: / Observation:)"

    def sniff(self, path: Path, head: str) -> float:
        lines = [line for line in head.splitlines()[:50] if line.strip()]
        if not lines:
            return 0.0
        roles = [m.group("role").lower() for line in lines if (m := _PREFIX.match(line))]
        if not roles or roles[0] not in _ROLES:
            return 0.0
        known = sum(role in _ROLES for role in roles)
        has_pair = "action" in roles and "observation" in roles
        return 0.9 if has_pair and known >= 2 else (0.4 if known else 0.0)

    def read(self, path: Path) -> Iterator[ReadItem]:
        source = str(path)
        builder = _EpisodeBuilder(episode_id=path.stem, line=1)
        entry: _Entry | None = None
        episodes = 0
        limit = import_limits().max_record_bytes
        with open(path, "rb") as handle:  # line by line: a line that is no UTF-8 or too long is rejected, the rest read
            number = 0
            while raw := handle.readline(limit + 1):
                number += 1
                if len(raw) > limit and not raw.endswith(b"\n"):
                    size = len(raw) + skip_rest_of_line(handle)
                    yield Reject(
                        source,
                        f"line of {size} bytes is over the {limit}-byte limit (WORLDSMITH_IMPORT_MAX_RECORD_BYTES)",
                        line=number,
                        raw=raw[:_RAW_HEAD].decode("utf-8", errors="replace"),
                    )
                    continue
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as error:
                    yield Reject(
                        source,
                        f"not UTF-8 text ({error.reason} at byte {error.start} of the line)",
                        line=number,
                        raw=raw.decode("utf-8", errors="replace").rstrip("\r\n"),
                    )
                    continue
                match = _PREFIX.match(line)
                role = match.group("role").lower() if match else None
                if match is not None and role in _ROLES:
                    if entry is not None:
                        yield from self._apply(builder, entry, source)
                    text = line[match.end() :]
                    if role == "episode":
                        if builder.turns or builder.pending or builder.context:
                            yield from self._finish(builder, source)
                            episodes += 1
                        builder = _EpisodeBuilder(episode_id=text.strip() or f"{path.stem}-{episodes}", line=number)
                        entry = None
                        continue
                    entry = _Entry(role=role, text=text, line=number)
                elif entry is not None:
                    entry.more.append(line)
                elif line.strip():
                    yield Reject(
                        source, "text before the first role prefix (User:/Action:/Observation:)", line=number, raw=line
                    )
        if entry is not None:
            yield from self._apply(builder, entry, source)
        yield from self._finish(builder, source)

    def _apply(self, builder: _EpisodeBuilder, entry: _Entry, source: str) -> Iterator[Reject]:
        text = entry.full_text().rstrip("\n")
        if entry.role in ("task", "instruction"):
            builder.task = text.strip()
        elif entry.role == "action":
            if builder.pending is not None:
                yield Reject(
                    source,
                    "action has no observation (another action follows)",
                    line=builder.pending.line,
                    raw=f"Action: {builder.pending.text}",
                )
            builder.pending = _Entry("action", text, entry.line)
        elif entry.role == "observation":
            if builder.pending is None:
                if not builder.turns and builder.initial is None:
                    builder.initial = Observation(text=text)
                else:
                    yield Reject(source, "observation has no action", line=entry.line, raw=f"Observation: {text}")
                return
            action_entry = builder.pending
            builder.pending = None
            builder.turns.append(
                Turn(
                    index=len(builder.turns),
                    action=action_from_text(action_entry.text),
                    observation=Observation(text=text),
                    context=builder.context,
                    provenance=Provenance(
                        source=source,
                        line=action_entry.line,
                        content_hash=content_digest([action_entry.text, text])[:16],
                    ),
                )
            )
            builder.context = []
        else:
            builder.context.append(ContextEvent(role=_CONTEXT_ROLES[entry.role], content=text.strip()))

    def _finish(self, builder: _EpisodeBuilder, source: str) -> Iterator[ReadItem]:
        if builder.pending is not None:
            yield Reject(
                source,
                "action has no observation (episode ends)",
                line=builder.pending.line,
                raw=f"Action: {builder.pending.text}",
            )
        if not builder.turns and builder.initial is None and not builder.context:
            return
        yield Episode(
            id=builder.episode_id,
            task=builder.task,
            initial_observation=builder.initial,
            turns=builder.turns,
            final_context=builder.context,
            source=SourceRef(format=self.name, path=source, line=builder.line),
        )
