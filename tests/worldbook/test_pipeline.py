"""The declared build pipeline: one stage list, extended by one stage object, each stage cached by its fingerprint
and reported as it starts and ends."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from helpers import sample_episodes
from worldsmith.worldbook import build_worldbook
from worldsmith.worldbook.book_stages import BOOK_STAGES, STAGES, BookStage
from worldsmith.worldbook.pipeline import Artifacts, BuildContext, StageProgress, with_stage


@dataclass(frozen=True)
class CountActions:
    """A stage added from outside: how many turns each action has (reads the evidence, makes `action_counts`)."""

    minimum: int = 1
    name: str = "count"
    inputs: tuple[str, ...] = ("evidence",)
    output: str = "action_counts"
    calls: list[int] | None = None

    @property
    def output_type(self) -> Any:
        return dict[str, int]

    def settings(self) -> dict[str, Any]:
        return {"minimum": self.minimum}

    def run(self, artifacts: Artifacts, context: BuildContext) -> dict[str, int]:
        if self.calls is not None:
            self.calls.append(1)
        counts: dict[str, int] = {}
        for item in artifacts["evidence"]:
            counts[item.action] = counts.get(item.action, 0) + 1
        return {action: n for action, n in counts.items() if n >= self.minimum}


def test_the_stage_list_is_declared_once_in_order() -> None:
    assert STAGES == ("align", "extract", "rules", "review", "schema", "contracts", "notes", "demonstrations",
                      "termination", "tools", "compile")
    assert list(build_worldbook(sample_episodes("bfcl"), name="bfcl").timings) == list(STAGES)


def test_one_stage_object_extends_the_pipeline_and_is_cached_by_its_fingerprint(tmp_path: Path) -> None:
    episodes = sample_episodes("bfcl")
    calls: list[int] = []
    stages = with_stage(BOOK_STAGES, CountActions(calls=calls), before="compile")
    events: list[StageProgress] = []
    first = build_worldbook(episodes, name="bfcl", stages=stages, cache_dir=tmp_path, progress=events.append)
    assert list(first.timings) == [*STAGES[:-1], "count", "compile"]
    assert first.artifacts is not None and sum(first.artifacts["action_counts"].values()) == len(first.book.evidence)
    assert [(e.stage, e.state) for e in events[:2]] == [("align", "started"), ("align", "finished")]
    assert events[-1].state == "done" and events[-1].fraction == 1.0
    assert [e.stage for e in events if e.state == "finished"] == list(first.timings)
    again = build_worldbook(episodes, name="bfcl", stages=stages, cache_dir=tmp_path)
    assert calls == [1] and again.stage_reports["count"]["cached"]
    assert again.book == first.book
    changed = with_stage(BOOK_STAGES, CountActions(minimum=2, calls=calls), before="compile")
    build_worldbook(episodes, name="bfcl", stages=changed, cache_dir=tmp_path)
    assert calls == [1, 1]  # other settings: another fingerprint, computed again


def test_a_stage_list_that_cannot_run_is_refused_before_any_stage_runs() -> None:
    with pytest.raises(ValueError, match="already has a stage 'review'"):
        with_stage(BOOK_STAGES, BookStage("review", (), "x", None, lambda a, c: None))
    with pytest.raises(ValueError, match="no stage 'nope'"):
        with_stage(BOOK_STAGES, CountActions(), before="nope")
    early = with_stage(BOOK_STAGES[1:], CountActions())  # nothing makes `evidence` any more
    with pytest.raises(ValueError, match="'extract' reads evidence, which no earlier stage makes"):
        build_worldbook(sample_episodes("bfcl"), name="bfcl", stages=early)


def test_a_transient_output_no_later_stage_reads_is_not_kept_but_stays_known(tmp_path: Path) -> None:
    episodes = sample_episodes("bfcl")
    built = build_worldbook(episodes, name="bfcl", cache_dir=tmp_path)
    assert built.artifacts is not None
    assert "extractions" not in built.artifacts.values and "extractions" in built.artifacts.fingerprints
    assert built.stage_reports["extract"]["facts"] > 0  # reported (and cached) as any stage
    assert list(tmp_path.glob("extract-*.json"))
    reads_it = with_stage(BOOK_STAGES, BookStage("facts", ("extractions",), "fact_count", int,
                                                 lambda a, _c: sum(len(x.facts) for x in a["extractions"])),
                          before="compile")
    kept = build_worldbook(episodes, name="bfcl", stages=reads_it).artifacts
    assert kept is not None and kept["fact_count"] == built.stage_reports["extract"]["facts"]
