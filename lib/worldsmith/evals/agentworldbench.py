"""AgentWorldBench interop: read its rows, predict the last observation of each, write and score them in its layout.

An AgentWorldBench row is one prediction task: `prompt` holds the steps so far (the last one is the
action to answer), `response` the real observations (the last one is the target). We keep the row
as it is and add `prediction` (the world model's observation wrapped in the
`<predicted_observation>` tags the benchmark's prompt asks for) and `model`, so the file can go back
to the benchmark's own tooling; `score_rows` scores such a file with our metrics.

    rows = read_rows("data_samples/terminal.agentworldbench.jsonl")
    predicted = predict_rows(rows, make_method("nearest", book), book=book)   # leakage-checked against the book
    write_rows("predictions.jsonl", predicted); score_rows(predicted)["metrics"]["exact_match"]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from worldsmith.evals.metrics import METRICS, metric_scores
from worldsmith.sim.base import WorldModel
from worldsmith.traces.actions import action_from_text
from worldsmith.traces.importers.agentworldbench import clean_observation, parse_step_prompt
from worldsmith.traces.importers.base import iter_json_records
from worldsmith.traces.model import ContextEvent, Episode, Observation, Turn
from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.leakage import check_leakage
from worldsmith.worldbook.model import Worldbook

__all__ = ["PREDICTION_FIELD", "AWBRow", "predict_rows", "read_rows", "row_episode", "score_rows", "write_rows"]

PREDICTION_FIELD = "prediction"
_OPEN, _CLOSE = "<predicted_observation>", "</predicted_observation>"


@dataclass
class AWBRow:
    """One row as read (`raw` keeps every field for writing back) and where it was in the file."""

    raw: dict[str, Any]
    source: str
    line: int

    @property
    def task(self) -> str:
        return str(self.raw.get("task", ""))

    @property
    def row_id(self) -> str:
        return str(self.raw.get("id", ""))

    @property
    def prompts(self) -> list[str]:
        return list(self.raw["prompt"])

    @property
    def responses(self) -> list[str]:
        return list(self.raw["response"])

    @property
    def reference(self) -> str:
        """The observation to predict: the last response without its header or tags."""
        return clean_observation(self.responses[-1])

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}"


def read_rows(path: str | Path) -> list[AWBRow]:
    """Every row of an AgentWorldBench JSONL file; ValueError naming file:line and the field for a bad one."""
    source = str(path)
    rows: list[AWBRow] = []
    for record in iter_json_records(Path(path)):
        where = f"{source}:{record.line}"
        if record.error is not None:
            raise BadInputError(f"{record.error}", where=str(where))
        value = record.value
        if not isinstance(value, dict):
            raise BadInputError(f"expected a row object, found {type(value).__name__}", where=str(where))
        for key in ("prompt", "response"):
            if not isinstance(value.get(key), list) or not all(isinstance(item, str) for item in value[key]):
                raise BadInputError(f"field '{key}' must be a list of strings", where=str(where))
        if not value["prompt"] or len(value["prompt"]) != len(value["response"]):
            raise BadInputError(f"{where}: 'prompt' ({len(value['prompt'])} steps) and 'response' "
                             f"({len(value['response'])}) must be equally long and not empty")
        rows.append(AWBRow(raw=value, source=source, line=record.line))
    return rows


def row_episode(row: AWBRow) -> Episode:
    """The row as an episode (id `<task>-<id>`, as the importer names it); its last turn is the target."""
    turns: list[Turn] = []
    initial: Observation | None = None
    for index, (prompt, response) in enumerate(zip(row.prompts, row.responses, strict=True)):
        try:
            step = parse_step_prompt(prompt)
        except ValueError as error:
            raise BadInputError(f"prompt {index}: {error}", where=str(row.where)) from None
        context = [ContextEvent(role="user", content=step.before)] if step.before else []
        if step.state is not None:
            if index == 0:
                initial = Observation(text=step.state)
            else:
                context.append(ContextEvent(role="environment", content=step.state, name="current_state"))
        turns.append(Turn(index=index, action=action_from_text(step.action_text),
                          observation=Observation(text=clean_observation(response)), context=context))
    episode_id = f"{row.task}-{row.row_id}" if row.task else row.row_id or f"row-{row.line}"
    return Episode(id=episode_id, env_id=row.task or None, task_id=row.row_id or None, initial_observation=initial,
                   turns=turns)


def predict_rows(rows: Sequence[AWBRow], model: WorldModel, *, book: Worldbook | None = None,
                 model_name: str | None = None) -> list[dict[str, Any]]:
    """Each row with the world model's prediction of its last observation (from the real steps before it).

    With `book`, refuses (`LeakageError`) when a row's trajectory is in the book's evidence.
    """
    episodes = [row_episode(row) for row in rows]
    if book is not None:
        distinct = {e.id: e for e in sorted(episodes, key=lambda e: len(e.turns))}  # the longest prefix per id
        check_leakage(book, list(distinct.values()))
    out = []
    for row, episode in zip(rows, episodes, strict=True):
        model.start(episode.model_copy(update={"turns": episode.turns[:-1]}))
        prediction = model.predict(episode.turns[-1].action)
        out.append({**row.raw, PREDICTION_FIELD: f"{_OPEN}\n{prediction.observation}\n{_CLOSE}",
                    "model": model_name or getattr(model, "name", "world-model")})
    return out


def write_rows(path: str | Path, rows: Iterable[dict[str, Any]]) -> int:
    """Rows as JSONL (atomically); returns how many."""
    lines = [orjson.dumps(row) + b"\n" for row in rows]
    atomic_write_bytes(Path(path), b"".join(lines))
    return len(lines)


def _predicted_text(value: str) -> str:
    start, end = value.find(_OPEN), value.rfind(_CLOSE)
    if start >= 0 and end > start:
        return value[start + len(_OPEN): end].strip("\n")
    return clean_observation(value)


def score_rows(rows: Sequence[dict[str, Any] | AWBRow]) -> dict[str, Any]:
    """Our metrics on predicted rows: per row and their means (`json_f1` over JSON targets only)."""
    per_row: list[dict[str, Any]] = []
    for index, row in enumerate(rows):
        raw = row.raw if isinstance(row, AWBRow) else row
        if not isinstance(raw.get(PREDICTION_FIELD), str):
            raise BadInputError(f"row {index}: no '{PREDICTION_FIELD}' field to score")
        reference = clean_observation(raw["response"][-1])
        prediction = _predicted_text(raw[PREDICTION_FIELD])
        per_row.append({"task": raw.get("task"), "id": raw.get("id"), "turn_idx": raw.get("turn_idx"),
                        "reference": reference, "prediction": prediction, **metric_scores(prediction, reference)})
    means: dict[str, float | None] = {}
    for metric in METRICS:
        values = [r[metric] for r in per_row if r[metric] is not None]
        means[metric] = round(sum(values) / len(values), 6) if values else None
    return {"rows": len(per_row), "metrics": means, "per_row": per_row}
