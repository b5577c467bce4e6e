"""Import outcomes: what was taken, what was rejected and why, per file.

A `Reject` names the file, the line (or JSON pointer) and the reason, and keeps the rejected
record verbatim so it can be written to a quarantine file and fixed by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from worldsmith.util.errors import BadInputError

__all__ = ["EnvCandidate", "EnvDecision", "FileReport", "ImportReport", "Reject", "TraceFormatError"]

EnvDecision = Literal["joined", "new", "ambiguous"]


class TraceFormatError(BadInputError):
    """A whole file cannot be read (unknown format, binary data, unreadable)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(reason, where=path)
        self.path = path
        self.reason = reason


@dataclass(slots=True)
class Reject:
    """A record an importer could not turn into an episode."""

    source: str
    reason: str
    line: int | None = None
    pointer: str | None = None
    raw: str | None = None

    def location(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
        if self.pointer:
            where += f" {self.pointer}"
        return where

    def summary(self) -> dict[str, Any]:
        return {"source": self.source, "line": self.line, "pointer": self.pointer, "reason": self.reason}


class EnvCandidate(BaseModel):
    """An environment of the workspace compared with an imported file that names none (`workspace.env_identity`)."""

    env: str
    relation: str = Field(description="How the file's tools relate to the environment's: same tools, subset, near "
                          "subset, superset, near superset, overlap, disjoint, or no tool calls.")
    shared_tools: int
    file_tools: int
    env_tools: int
    prompt_similarity: float | None = Field(default=None, description="Word-set Jaccard of the closest system "
                                            "prompts (None: one side has none).")
    matches: bool = Field(description="Whether the file may join it (tools and system prompt agree).")


class FileReport(BaseModel):
    """The outcome of importing one file."""

    path: str
    format: str | None = None
    detection_score: float | None = None
    episodes: int = 0
    turns: int = 0
    rejected: int = 0
    duplicates: int = 0
    renamed: int = Field(default=0, description="Episodes whose id collided and got a suffix.")
    dialogue_only: int = Field(default=0, description="Episodes stored without a tool turn (messages only), "
                               "counted in `episodes`; building and evaluation leave them out.")
    empty: int = Field(default=0, description="Records with nothing to keep (no turn, no message, no task): "
                       "rejected, not stored.")
    derived_env: str | None = Field(default=None, description="The environment id given to episodes that named none.")
    derived_from: str | None = Field(default=None, description="What `derived_env` was derived from: 'declared "
                                     "tools' (the logs' tool schemas), 'matched environment' (an environment of the "
                                     "workspace whose tools and system prompt the file matches: `env_reason`) or "
                                     "'called tools' (the tools the file calls).")
    env_decision: EnvDecision | None = Field(
        default=None, description="For a file without declared tool schemas: whether it joined an environment of the "
        "workspace it matches, got a new one, or matches several (kept apart until the user chooses).")
    env_reason: str | None = Field(default=None, description="Why, in words: the environment and what matched.")
    env_candidates: list[EnvCandidate] = Field(default_factory=list, description="The environments it matches "
                                               "(or, for a new one, the closest).")
    error: str | None = Field(default=None, description="Why the whole file was rejected.")
    bytes: int = 0


class ImportReport(BaseModel):
    """The outcome of one ingest call, written next to the quarantine file."""

    ingest_id: str
    dataset: str
    strict: bool = False
    committed: bool = False
    files: list[FileReport] = Field(default_factory=list)
    rejects: list[dict[str, Any]] = Field(
        default_factory=list, description="First rejects (file, line, pointer, reason)."
    )
    rejects_truncated: bool = False
    quarantine_path: str | None = None
    report_path: str | None = None
    seconds: float = 0.0
    redaction: dict[str, Any] | None = Field(
        default=None, description="With redaction: per kind, occurrences replaced and values first met; the "
        "mapping file (None: none kept).")

    @property
    def episodes(self) -> int:
        return sum(f.episodes for f in self.files)

    @property
    def turns(self) -> int:
        return sum(f.turns for f in self.files)

    @property
    def rejected(self) -> int:
        return sum(f.rejected for f in self.files)

    @property
    def duplicates(self) -> int:
        return sum(f.duplicates for f in self.files)

    @property
    def dialogue_only(self) -> int:
        return sum(f.dialogue_only for f in self.files)

    def summary(self) -> dict[str, Any]:
        """The one JSON object `worldsmith ingest --json` prints."""
        return {
            "dataset": self.dataset,
            "ingest_id": self.ingest_id,
            "committed": self.committed,
            "strict": self.strict,
            "episodes": self.episodes,
            "turns": self.turns,
            "dialogue_only": self.dialogue_only,
            "rejected": self.rejected,
            "duplicates": self.duplicates,
            "empty": sum(f.empty for f in self.files),
            "renamed": sum(f.renamed for f in self.files),
            "files": [
                {
                    "path": f.path,
                    "format": f.format,
                    "episodes": f.episodes,
                    "turns": f.turns,
                    "dialogue_only": f.dialogue_only,
                    "rejected": f.rejected,
                    "duplicates": f.duplicates,
                    "renamed": f.renamed,
                    "empty": f.empty,
                    "derived_env": f.derived_env,
                    "derived_from": f.derived_from,
                    "env_decision": f.env_decision,
                    "env_reason": f.env_reason,
                    "env_candidates": [c.model_dump() for c in f.env_candidates],
                    "error": f.error,
                }
                for f in self.files
            ],
            "rejects": self.rejects,
            "report": self.report_path,
            "quarantine": self.quarantine_path,
            "redaction": self.redaction,
            "seconds": round(self.seconds, 3),
        }


@dataclass(slots=True)
class RejectLog:
    """Keeps the first `keep` rejects in memory for the report; all go to quarantine."""

    keep: int = 1000
    items: list[dict[str, Any]] = field(default_factory=list)
    truncated: bool = False

    def add(self, reject: Reject) -> None:
        if len(self.items) < self.keep:
            self.items.append(reject.summary())
        else:
            self.truncated = True
