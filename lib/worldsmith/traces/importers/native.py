"""The native worldsmith format: JSONL, one `Episode` (as `Episode.model_dump(mode="json")`) a line."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from worldsmith.traces.importers.base import JsonRecord, ReadItem, safe_records
from worldsmith.traces.model import Episode, Provenance, SourceRef, content_digest

__all__ = ["NativeImporter", "FORMAT_TAG"]

FORMAT_TAG = "worldsmith.episode/v1"


class NativeImporter:
    name = "native"
    description = "worldsmith JSONL: one Episode object per line (see `worldsmith traces schema`)"

    _turn_shape = re.compile(r'"turns"\s*:\s*\[')

    def sniff(self, path: Path, head: str) -> float:
        stripped = head.lstrip()
        if not stripped.startswith("{"):
            return 0.0
        if f'"format":"{FORMAT_TAG}"' in head.replace(" ", ""):
            return 1.0
        if self._turn_shape.search(head) and (('"observation"' in head and '"action"' in head)
                                              or '"final_context"' in head):  # also episodes of dialogue only
            return 0.7
        return 0.0

    def read(self, path: Path) -> Iterator[ReadItem]:
        return safe_records(path, lambda record: self._convert(path, record))

    def _convert(self, path: Path, record: JsonRecord) -> Iterator[ReadItem]:
        value = record.value
        if not isinstance(value, dict):
            yield record.reject(str(path), f"expected an episode object, found {type(value).__name__}")
            return
        body = {key: item for key, item in value.items() if key != "format"}
        episode = Episode.model_validate(body)
        source = str(path)
        for turn in episode.turns:
            if turn.provenance is None:
                turn.provenance = Provenance(
                    source=source,
                    line=record.line,
                    pointer=f"{record.pointer}/turns/{turn.index}",
                    content_hash=content_digest(turn.model_dump(mode="json", exclude={"provenance", "id"}))[:16],
                )
        if episode.source is None:
            episode.source = SourceRef(format=self.name, path=source, line=record.line, pointer=record.pointer or None)
        yield episode
