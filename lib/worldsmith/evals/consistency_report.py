"""The consistency report: per invariant and per tool, the checks made and the violations found, with examples.

    report.invariants["repeated_reads"].rate          # violations / checks (None: nothing was checked)
    report.tools["get_order"]["answers_about_id"]     # one tool's tally of one invariant
    report.examples                                   # the calls and the answers of some violations, truncated
    report.source().line()                            # what produced the numbers: method, model, book, n checks, run

Plain data (pydantic) so the CLI's `--json`, the run folder's `consistency.json` and the workbench read the same.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, computed_field

from worldsmith.llm.provenance import NumberProvenance
from worldsmith.util.atomic import atomic_write_json
from worldsmith.util.errors import BadInputError, user_path

__all__ = ["INVARIANTS", "REPORT_FILE", "ConsistencyReport", "Tally", "Violation", "read_report"]

# The invariants every stateful API obeys, in the order the report lists them, with what each means.
INVARIANTS: dict[str, str] = {
    "repeated_reads": "a read repeated with nothing in between answers the same",
    "answers_about_id": "a read's record is the entity whose id was asked, never another one",
    "stable_existence": "an entity answered as existing is not later 'not found' (nor the reverse) without a write",
    "spelling": "the same call as an Action, as text, as an OpenAI tool call and as an MCP call answers the same",
    "write_then_read": "a write and the next read of its record agree on the fields the recordings show agreeing",
}
REPORT_FILE = "consistency.json"  # the report's name in a run folder
_STRICT = ConfigDict(extra="forbid")
_READ_BACK = ConfigDict(extra="ignore")  # the computed fields (rate, checks, violations) come back in stored JSON


class Tally(BaseModel):
    """How often one invariant was checked and how often it failed."""

    model_config = _READ_BACK

    checks: int = Field(default=0, ge=0)
    violations: int = Field(default=0, ge=0)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def rate(self) -> float | None:
        """Violations per check; None when nothing was checked (no evidence of either)."""
        return round(self.violations / self.checks, 4) if self.checks else None

    def add(self, violated: bool) -> None:
        self.checks += 1
        self.violations += violated


class Violation(BaseModel):
    """One failed check: the calls made (as text) and what the simulator answered to each, truncated."""

    model_config = _STRICT

    invariant: str
    tool: str
    session: int = Field(ge=0)
    step: int = Field(ge=0)
    calls: list[str]
    answers: list[str]
    note: str = ""


class ConsistencyReport(BaseModel):
    """One consistency run of one world model on one book (see `evals.consistency`)."""

    model_config = _READ_BACK

    method: str
    book: str
    book_version: str | None = None
    seed: int
    sessions: int = Field(ge=0)
    steps: int = Field(ge=0, description="Probe steps per session.")
    predictions: int = Field(default=0, ge=0, description="predict() calls made, asides included.")
    invariants: dict[str, Tally] = Field(default_factory=lambda: {name: Tally() for name in INVARIANTS})
    tools: dict[str, dict[str, Tally]] = Field(default_factory=dict, description="tool -> invariant -> tally.")
    examples: list[Violation] = Field(default_factory=list)
    plan: dict[str, Any] = Field(default_factory=dict, description="What was probed: the tools' roles and id "
                                 "arguments, the ids seen and unseen, the agreeing write -> read pairs.")
    provenance: NumberProvenance | None = Field(default=None, description="What produced the numbers (absent in "
                                                "reports written before it was recorded: `source()` infers it).")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def checks(self) -> int:
        return sum(tally.checks for tally in self.invariants.values())

    @computed_field  # type: ignore[prop-decorator]
    @property
    def violations(self) -> int:
        return sum(tally.violations for tally in self.invariants.values())

    def source(self, model: str | None = None, trained_on: str | None = None, run: str | None = None, *,
               recorded: bool = False) -> NumberProvenance:
        """What produced the rates: the method (on `model`, "none" without one), the probe sessions planned from the
        book's evidence, n checks, and the command; the stored record when the report has one (an older report's is
        inferred from its own fields, its model unknown)."""
        if self.provenance is not None:
            return self.provenance
        words = ["worldsmith", "consistency", "--book", self.book, *(["--version", self.book_version]
                                                                     if self.book_version else []),
                 "--method", self.method, "--sessions", str(self.sessions), "--steps", str(self.steps),
                 "--seed", str(self.seed), *(["--llm", model] if model and model != "none" else [])]
        return NumberProvenance(method=self.method, model=model, trained_on=trained_on,
                                dataset=f"worldbook {self.book}", dataset_digest=self.book_version,
                                split=f"{self.sessions} probe sessions of {self.steps} steps (seed {self.seed})",
                                protocol="open loop", n=self.checks, unit="checks",
                                run=run or f"consistency of {self.method} on {self.book}@{self.book_version or '?'} "
                                           f"seed {self.seed}",
                                command=shlex.join(words), recorded=recorded)

    def count(self, invariant: str, tool: str, violated: bool) -> None:
        """Add one check of `invariant` on `tool`."""
        self.invariants[invariant].add(violated)
        self.tools.setdefault(tool, {name: Tally() for name in INVARIANTS})[invariant].add(violated)

    def rows(self) -> list[dict[str, Any]]:
        """One row per tool: each invariant's violations/checks (the table the CLI and the workbench show)."""
        out = []
        for tool in sorted(self.tools):
            row: dict[str, Any] = {"tool": tool}
            for name in INVARIANTS:
                tally = self.tools[tool][name]
                row[name] = f"{tally.violations}/{tally.checks}" if tally.checks else ""
            out.append(row)
        return out

    def save(self, path: str | Path) -> Path:
        """Store as JSON (atomically); a folder gets `consistency.json` inside it."""
        target = Path(path)
        if target.is_dir():
            target = target / REPORT_FILE
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(target, self.model_dump(mode="json"))
        return target


def read_report(path: str | Path) -> ConsistencyReport:
    """A stored report (a file, or a run folder holding `consistency.json`)."""
    target = Path(path)
    if target.is_dir():
        target = target / REPORT_FILE
    with user_path(target, "consistency report"):
        data = target.read_text(encoding="utf-8")
    try:
        return ConsistencyReport.model_validate_json(data)
    except ValueError as error:
        raise BadInputError(f"not a consistency report: {error}", where=str(target)) from None
