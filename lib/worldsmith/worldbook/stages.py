"""Typed records passed between construction stages, shared by the deterministic and the model-backed builders.

Either implementation can run a stage and their outputs can be compared item by item; the stages themselves are
declared in `book_stages.BOOK_STAGES`. `Extraction` is what the extract stage says about one transition.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from worldsmith.worldbook.model import Effect

__all__ = ["Extraction", "Fact"]


class Fact(BaseModel):
    """A value the observation of a turn shows, at a concrete state path.

    The path is a list of segments (`["world", "contents", "cabinet 1"]`): concrete keys may hold
    dots and spaces ("report.txt", "cabinet 1"), which a dotted string could not keep apart.
    """

    model_config = ConfigDict(extra="forbid")

    path: list[str] = Field(min_length=2)
    value: Any
    kind: Literal["list", "value", "json"] = "value"


class Extraction(BaseModel):
    """One transition as the extract stage reads it."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str
    action: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    outcome: str = "success"
    facts: list[Fact] = Field(default_factory=list)
    changes: list[Effect] = Field(default_factory=list, description="Candidate state changes this turn made.")
    ambiguities: list[str] = Field(default_factory=list)
    source: Literal["deterministic", "model"] = "deterministic"
