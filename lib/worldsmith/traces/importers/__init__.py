"""Trace importers, one per format, behind the `Importer` protocol; auto-detection by sniffing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worldsmith.traces.import_report import TraceFormatError
from worldsmith.traces.importers.agentworldbench import AgentWorldBenchImporter
from worldsmith.traces.importers.base import Importer, ReadItem, read_head, text_head
from worldsmith.traces.importers.inspect_log import InspectLogImporter
from worldsmith.traces.importers.native import NativeImporter
from worldsmith.traces.importers.openai_chat import OpenAIChatImporter
from worldsmith.traces.importers.otel import OTelSpansImporter
from worldsmith.traces.importers.role_prefixed import RolePrefixedImporter
from worldsmith.traces.importers.trace2env import Trace2EnvImporter
from worldsmith.util.registry import NotRegisteredError, Registry

__all__ = [
    "AgentWorldBenchImporter",
    "Detection",
    "ENTRY_POINT_GROUP",
    "IMPORTERS",
    "Importer",
    "InspectLogImporter",
    "NativeImporter",
    "OTelSpansImporter",
    "OpenAIChatImporter",
    "ReadItem",
    "RolePrefixedImporter",
    "Trace2EnvImporter",
    "UnknownTraceFormatError",
    "detect_format",
    "get_importer",
    "register_importer",
]


class UnknownTraceFormatError(NotRegisteredError, ValueError):
    """No importer reads this format (a ValueError, as the lookup's error always was)."""


ENTRY_POINT_GROUP = "worldsmith.importers"
# Every importer by format name; a third-party format plugs in with `register_importer`, or as an installed
# package's `worldsmith.importers` entry point (an Importer, or a module that registers one), loaded on first use.
IMPORTERS: Registry[Importer] = Registry("trace format", entry_point_group=ENTRY_POINT_GROUP,
                                         not_found=UnknownTraceFormatError)

MIN_DETECTION_SCORE = 0.3


def register_importer(importer: Importer) -> None:
    """Add (or replace) an importer; third-party formats plug in here."""
    IMPORTERS.register(importer.name, importer, replace=True)


for _importer in (
    NativeImporter(),
    OpenAIChatImporter(),
    AgentWorldBenchImporter(),
    RolePrefixedImporter(),
    Trace2EnvImporter(),
    InspectLogImporter(),
    OTelSpansImporter(),
):
    register_importer(_importer)


def get_importer(name: str) -> Importer:
    """The importer of format `name`; UnknownTraceFormatError (a ValueError) naming the known formats."""
    return IMPORTERS.get(name)


@dataclass(frozen=True, slots=True)
class Detection:
    """The result of sniffing one file: the chosen importer, its score, and every score."""

    importer: Importer
    score: float
    scores: dict[str, float]


def detect_format(path: Path) -> Detection:
    """Pick the importer whose `sniff` scores the file highest; TraceFormatError if none fits."""
    path = Path(path)
    if not path.exists():
        raise TraceFormatError(str(path), "file not found")
    if not path.is_file():
        raise TraceFormatError(str(path), "not a regular file")
    raw_head = read_head(path)
    binary = _sniff_binary(path, raw_head)
    if binary is not None:
        return binary
    head = text_head(path, raw_head)
    importers = IMPORTERS.as_dict()
    scores = {name: importer.sniff(path, head) for name, importer in importers.items()}
    best = max(scores, key=lambda name: scores[name])
    if scores[best] < MIN_DETECTION_SCORE:
        raise TraceFormatError(
            str(path),
            "could not detect the trace format (scores: "
            + ", ".join(f"{name} {score:.2f}" for name, score in sorted(scores.items()))
            + "); pass --format with one of: " + ", ".join(sorted(importers)),
        )
    return Detection(importers[best], scores[best], scores)


def _sniff_binary(path: Path, head: bytes) -> Detection | None:
    """Importers of binary containers (e.g. Inspect's zip `.eval` logs) define `sniff_bytes`;
    they are asked first, since the text sniffers reject binary files."""
    importers = IMPORTERS.as_dict()
    scores = {
        name: sniff(path, head)
        for name, importer in importers.items()
        if (sniff := getattr(importer, "sniff_bytes", None)) is not None
    }
    best = max(scores, key=lambda name: scores[name], default=None)
    if best is None or scores[best] < MIN_DETECTION_SCORE:
        return None
    return Detection(importers[best], scores[best], scores)
