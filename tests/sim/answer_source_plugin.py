"""An answer source as a researcher would write one, in one file: a tracker of the plain shape, registered with
`@answer_source` through `TrackerSource`; imported through $WORLDSMITH_SOURCE_PLUGINS (or by a test)."""

from __future__ import annotations

from typing import Any

from worldsmith.sim.sources import Answer, AnswerSource, CandidateAnswer, SourceContext, TrackerSource, answer_source

NAME = "last_of_action"


class LastOfAction:
    """What the latest call of the same action, whatever its arguments, got in this episode."""

    def __init__(self) -> None:
        self.reset("")

    def reset(self, opening: str) -> None:
        self.last: dict[str, str] = {}

    def observe(self, name: str, arguments: dict[str, Any], observation: str) -> None:
        self.last[name] = observation

    def propose(self, name: str, arguments: dict[str, Any], line: str) -> list[CandidateAnswer]:
        seen = self.last.get(name)
        return [CandidateAnswer(NAME, seen, notes=[f"what {name!r} got last"])] if seen is not None else []

    def snapshot(self) -> dict[str, Any]:
        return {"actions": sorted(self.last)}


@answer_source(NAME, snapshot_key="last of action", answers=(Answer(NAME, rank=-10, trusted=True),))
def build(context: SourceContext) -> AnswerSource:
    return TrackerSource(LastOfAction(), gate=context.tracking)
