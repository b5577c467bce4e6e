"""Trace importers, one per format, behind the `Importer` protocol; auto-detection by sniffing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from worldsmith.traces.importers.agentworldbench import AgentWorldBenchImporter
from worldsmith.traces.importers.base import Importer, ReadItem, read_head, text_head
from worldsmith.traces.importers.inspect_log import InspectLogImporter
from worldsmith.traces.importers.native import NativeImporter
from worldsmith.traces.importers.openai_chat import OpenAIChatImporter
from worldsmith.traces.importers.otel import OTelSpansImporter
from worldsmith.traces.importers.role_prefixed import RolePrefixedImporter
from worldsmith.traces.importers.trace2env import Trace2EnvImporter
from worldsmith.traces.report import TraceFormatError

__all__ = [
    "AgentWorldBenchImporter",
    "Detection",
    "IMPORTERS",
    "Importer",
    "InspectLogImporter",
    "NativeImporter",
    "OTelSpansImporter",
    "OpenAIChatImporter",
    "ReadItem",
    "RolePrefixedImporter",
    "Trace2EnvImporter",
    "detect_format",
    "get_importer",
    "register_importer",
]

IMPORTERS: dict[str, Importer] = {}

MIN_DETECTION_SCORE = 0.3


def register_importer(importer: Importer) -> None:
    """Add (or replace) an importer; third-party formats plug in here."""
    IMPORTERS[importer.name] = importer


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
    try:
        return IMPORTERS[name]
    except KeyError:
        known = ", ".join(sorted(IMPORTERS))
        raise ValueError(f"unknown trace format {name!r}; known formats: {known}") from None


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
    scores = {name: importer.sniff(path, head) for name, importer in IMPORTERS.items()}
    best = max(scores, key=lambda name: scores[name])
    if scores[best] < MIN_DETECTION_SCORE:
        raise TraceFormatError(
            str(path),
            "could not detect the trace format (scores: "
            + ", ".join(f"{name} {score:.2f}" for name, score in sorted(scores.items()))
            + "); pass --format with one of: " + ", ".join(sorted(IMPORTERS)),
        )
    return Detection(IMPORTERS[best], scores[best], scores)


def _sniff_binary(path: Path, head: bytes) -> Detection | None:
    """Importers of binary containers (e.g. Inspect's zip `.eval` logs) define `sniff_bytes`;
    they are asked first, since the text sniffers reject binary files."""
    scores = {
        name: sniff(path, head)
        for name, importer in IMPORTERS.items()
        if (sniff := getattr(importer, "sniff_bytes", None)) is not None
    }
    best = max(scores, key=lambda name: scores[name], default=None)
    if best is None or scores[best] < MIN_DETECTION_SCORE:
        return None
    return Detection(IMPORTERS[best], scores[best], scores)
