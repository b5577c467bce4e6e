"""AgentWorldBench rows: each row is a prefix of one trajectory; the longest row is the episode.

A row holds `task`, `id`, a `prompt` list (one user turn per step: optional `**Current State:**`,
then `**Action:**` with a fenced JSON action) and a `response` list (the environment's
observations). Rows of one trajectory share (`task`, `id`). The file is read twice: once to find
the longest row of each trajectory (keeping only its offset), once to read those rows, so memory
stays bounded by the number of trajectories, not the file size.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.traces.actions import action_from_text
from worldsmith.traces.importers.base import ReadItem, iter_json_records
from worldsmith.traces.model import (
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    content_digest,
)

__all__ = ["AgentWorldBenchImporter", "parse_step_prompt"]

_ACTION = re.compile(r"\*\*Action:\*\*\s*(?:```[a-zA-Z]*\n(?P<fenced>.*?)\n?```|(?P<plain>.*?)(?:\n\s*\n|$))", re.S)
_STATE = re.compile(r"\*\*Current State:\*\*\s*")
_HEADER = re.compile(r"^\s*#+\s*Turn\s+\d+\s*\n?", re.I)
_OBSERVATION_HEADER = re.compile(r"^\s*\*\*Environment Observation:\*\*\s*\n?", re.I)
_OPEN_TAG, _CLOSE_TAG = "<predicted_observation>", "</predicted_observation>"


@dataclass(slots=True)
class StepPrompt:
    action_text: str
    state: str | None
    before: str
    after: str


def parse_step_prompt(prompt: str) -> StepPrompt:
    """Split one step prompt into the action, the current state and the surrounding text."""
    match = _ACTION.search(prompt)
    if match is None:
        raise ValueError("step prompt has no '**Action:**' section")
    action_text = match.group("fenced") if match.group("fenced") is not None else match.group("plain")
    # The state runs from its header to the action header (the first one, so none lies between): sliced, not
    # matched by a lazy pattern with a lookahead, which rescans every newline run (quadratic on a hostile row).
    state_match = _STATE.search(prompt, 0, match.start())
    state = prompt[state_match.end() : match.start()].strip() if state_match else None
    before = prompt[: state_match.start() if state_match else match.start()]
    before = _HEADER.sub("", before).strip()
    return StepPrompt(action_text=action_text.strip(), state=state, before=before, after=prompt[match.end() :].strip())


def clean_observation(response: str) -> str:
    """The tagged observation when there is one, else the response without its header. Found with `str.find`:
    a lazy pattern rescans to the end from every unclosed opening tag (quadratic on a hostile row)."""
    opened = response.find(_OPEN_TAG)
    if opened >= 0:
        closed = response.find(_CLOSE_TAG, opened + len(_OPEN_TAG))
        if closed >= 0:
            return response[opened + len(_OPEN_TAG) : closed].strip("\n")
    return _OBSERVATION_HEADER.sub("", response, count=1)


@dataclass(slots=True)
class _Longest:
    steps: int
    line: int
    first_line: int
    rows: int


def _row_key(row: dict[str, Any]) -> tuple[str, str]:
    return str(row.get("task", "")), str(row.get("id", ""))


class AgentWorldBenchImporter:
    name = "agentworldbench"
    description = "AgentWorldBench rows (task, id, prompt[], response[], turn_idx, total_turns)"

    def sniff(self, path: Path, head: str) -> float:
        if not head.lstrip().startswith("{"):
            return 0.0
        keys = ('"prompt"', '"response"', '"turn_idx"', '"total_turns"', '"current_prompt"')
        hits = sum(key in head for key in keys)
        return 0.97 if hits >= 4 else (0.5 if hits >= 3 else 0.0)

    def read(self, path: Path) -> Iterator[ReadItem]:
        source = str(path)
        longest: dict[tuple[str, str], _Longest] = {}
        for record in iter_json_records(path):
            if record.error is not None:
                yield record.reject(source)
                continue
            row = record.value
            problem = self._row_problem(row)
            if problem:
                yield record.reject(source, problem)
                continue
            key = _row_key(row)
            steps = len(row["prompt"])
            best = longest.get(key)
            if best is None:
                longest[key] = _Longest(steps, record.line, record.line, 1)
            else:
                best.rows += 1
                if steps > best.steps:
                    best.steps, best.line = steps, record.line
        wanted = {best.line: (key, best) for key, best in longest.items()}
        for record in iter_json_records(path):
            if record.line in wanted and record.error is None:
                key, best = wanted[record.line]
                try:
                    yield from self._episode(path, record.value, record.line, best)
                except ValueError as error:
                    yield record.reject(source, f"invalid row: {error}")

    @staticmethod
    def _row_problem(row: Any) -> str | None:
        if not isinstance(row, dict):
            return f"expected a row object, found {type(row).__name__}"
        for key in ("prompt", "response"):
            if not isinstance(row.get(key), list) or not all(isinstance(item, str) for item in row[key]):
                return f"field '{key}' must be a list of strings"
        if len(row["prompt"]) != len(row["response"]):
            return f"'prompt' has {len(row['prompt'])} steps but 'response' has {len(row['response'])}"
        if not row["prompt"]:
            return "row has no steps"
        return None

    def _episode(self, path: Path, row: dict[str, Any], line: int, best: _Longest) -> Iterator[ReadItem]:
        source = str(path)
        task, row_id = _row_key(row)
        turns: list[Turn] = []
        initial: Observation | None = None
        suffix: str | None = None
        for index, (prompt, response) in enumerate(zip(row["prompt"], row["response"], strict=True)):
            step = parse_step_prompt(prompt)
            context: list[ContextEvent] = []
            if step.before:
                context.append(ContextEvent(role="user", content=step.before))
            if step.state is not None:
                if index == 0:
                    initial = Observation(text=step.state)
                else:
                    context.append(ContextEvent(role="environment", content=step.state, name="current_state"))
            if step.after:
                suffix = step.after
            turns.append(
                Turn(
                    index=index,
                    action=action_from_text(step.action_text),
                    observation=Observation(text=clean_observation(response)),
                    context=context,
                    provenance=Provenance(
                        source=source,
                        line=line,
                        pointer=f"/prompt/{index}",
                        content_hash=content_digest([prompt, response])[:16],
                    ),
                )
            )
        metadata = {k: v for k, v in row.items() if k not in ("prompt", "response", "current_prompt", "turn_idx", "id")}
        metadata["rows_merged"] = best.rows
        if suffix:
            metadata["prompt_suffix"] = suffix
        total = row.get("total_turns")
        if isinstance(total, int) and total > len(turns):
            metadata["incomplete"] = f"longest row has {len(turns)} of {total} turns"
        yield Episode(
            id=f"{task}-{row_id}" if task else str(row_id),
            env_id=task or None,
            task=None,
            task_id=row_id or None,
            initial_observation=initial,
            turns=turns,
            family=f"{task}-{row_id}",
            metadata=metadata,
            source=SourceRef(format=self.name, path=source, line=line),
        )
