"""The trace model, its importers and exporters.

    from worldsmith.traces import read_traces
    for item in read_traces(["runs/airline.json"]):
        ...  # Episode, or Reject (file, line/pointer, reason, raw record)

Exported: the trace model (`Episode`, `Turn`, `Action`, `Observation`, ...), reading (`read_traces`,
`detect_format`, the `IMPORTERS` registry), writing (`export_episodes`, `EXPORTERS`), the diffs every layer
shows (`observation_diff`: `json_changes` or `word_diff`) and trajectory families. File walking, limits and rows: their modules.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from worldsmith.traces.actions import action_from_json, action_from_text, action_line
from worldsmith.traces.dialogue import add_exclusions, exclude_dialogue_only
from worldsmith.traces.exporters import EXPORTERS, export_episodes, register_exporter
from worldsmith.traces.families import trajectory_family
from worldsmith.traces.files import expand_paths, sample_trace_files
from worldsmith.traces.import_report import FileReport, ImportReport, Reject, TraceFormatError
from worldsmith.traces.importers import (
    IMPORTERS,
    Detection,
    Importer,
    ReadItem,
    detect_format,
    get_importer,
    register_importer,
)
from worldsmith.traces.json_diff import JsonChange, ObservationDiff, json_changes, json_text_changes, observation_diff
from worldsmith.traces.model import (
    Action,
    ContextEvent,
    Episode,
    Observation,
    Provenance,
    SourceRef,
    Turn,
    parse_json_text,
    split_turn_id,
    turn_id,
)
from worldsmith.traces.text_diff import DiffSegment, word_diff

__all__ = [
    "EXPORTERS",
    "IMPORTERS",
    "Action",
    "ContextEvent",
    "Detection",
    "DiffSegment",
    "Episode",
    "FileReport",
    "ImportReport",
    "Importer",
    "JsonChange",
    "Observation",
    "ObservationDiff",
    "Provenance",
    "ReadItem",
    "Reject",
    "SourceRef",
    "TraceFormatError",
    "Turn",
    "action_from_json",
    "action_from_text",
    "action_line",
    "add_exclusions",
    "detect_format",
    "episode_json_schema",
    "exclude_dialogue_only",
    "export_episodes",
    "get_importer",
    "json_changes",
    "json_text_changes",
    "observation_diff",
    "parse_json_text",
    "read_traces",
    "register_exporter",
    "register_importer",
    "sample_trace_files",
    "split_turn_id",
    "trajectory_family",
    "turn_id",
    "word_diff",
]


def read_traces(paths: Iterable[str | Path], format: str | None = None) -> Iterator[ReadItem]:
    """Episodes and rejects from trace files, without a workspace (notebooks, quick looks).

    Raises TraceFormatError for a file that cannot be read at all (empty, binary, unknown).
    """
    for path in expand_paths(paths):
        importer = get_importer(format) if format else detect_format(path).importer
        yield from importer.read(path)


def episode_json_schema() -> dict[str, Any]:
    """JSON Schema of one line of the native JSONL format."""
    schema = Episode.model_json_schema(mode="serialization")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "worldsmith episode (native JSONL line)"
    schema.setdefault("properties", {})["format"] = {
        "const": "worldsmith.episode/v1", "description": "Format tag written by the exporter (optional on input)."
    }
    return schema
