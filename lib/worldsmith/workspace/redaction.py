"""A dataset's redaction: its mapping kept apart from it (or not at all), one writer at a time.

The mapping (value -> pseudonym, per kind, and the secret that keys the pseudonyms) turns pseudonyms back into
people, so it never sits inside the dataset: by default it is `<root>/redaction/<dataset>.json` (owner-only),
or a file the caller names anywhere outside the workspace's datasets. Every redacting ingest into a dataset
loads it, so a value gets the same pseudonym in each import. With `forget`, a fresh secret is drawn and nothing
is read or written: pseudonyms are consistent within that one import, and nobody can map them back.

A redacting ingest holds the mapping's lock from start to end (two at once would each draw pseudonyms for the
same new value), and writes the grown mapping before it commits: a committed pseudonym is never missing from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from filelock import FileLock, Timeout

from worldsmith.traces.redaction import DEFAULT_REGIONS, Redactor
from worldsmith.util.errors import BadInputError, BusyError
from worldsmith.workspace.layout import WorkspaceLayout

__all__ = ["LOCK_TIMEOUT_S", "DatasetRedaction", "RedactionSettings"]

LOCK_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class RedactionSettings:
    """How to redact what is stored in a dataset."""

    mapping: Path | None = field(default=None, metadata={
        "help": "where the mapping is kept (default: <workspace>/redaction/<dataset>.json); never in a dataset"})
    forget: bool = field(default=False, metadata={"help": "keep no mapping: pseudonyms cannot be mapped back, and "
                                                          "each import draws new ones"})
    regions: tuple[str, ...] = field(default=DEFAULT_REGIONS, metadata={
        "help": "phone regions: numbers written without a country code are read as the first region's"})

    def to_json(self) -> dict[str, Any]:
        return {"mapping": str(self.mapping) if self.mapping else None, "forget": self.forget,
                "regions": list(self.regions)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RedactionSettings:
        mapping = data.get("mapping")
        return cls(mapping=Path(mapping) if mapping else None, forget=bool(data.get("forget")),
                   regions=tuple(data.get("regions") or DEFAULT_REGIONS))


class DatasetRedaction:
    """The redactor of one dataset, as a context: locks and loads the mapping on entry, releases on exit;
    `keep()` writes it (call it before committing what was redacted; a long-lived recorder calls it as it goes).
    Entering waits at most `timeout` seconds for another holder (a redacting import, a recorder) to finish."""

    def __init__(self, root: Path, dataset: str, settings: RedactionSettings, *,
                 timeout: float = LOCK_TIMEOUT_S) -> None:
        if settings.forget and settings.mapping is not None:
            raise BadInputError("a redaction mapping file and keeping no mapping (forget) exclude each other")
        layout = WorkspaceLayout.of(root)
        self.path: Path | None = None
        if not settings.forget:
            self.path = Path(settings.mapping) if settings.mapping else layout.redaction_dir / f"{dataset}.json"
            datasets = layout.datasets_dir.resolve()
            if self.path.resolve().is_relative_to(datasets):
                raise BadInputError(f"the redaction mapping must be kept apart from the datasets, not under "
                                    f"{datasets}", where=str(self.path))
        self.settings = settings
        self._lock = FileLock(str(self.path) + ".lock", timeout=timeout) if self.path is not None else None
        self.redactor = Redactor(regions=settings.regions)

    def __enter__(self) -> DatasetRedaction:
        if self._lock is not None and self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            try:
                self._lock.acquire()
            except Timeout:
                raise BusyError(f"another redacting import or recorder of dataset {self.path.stem!r} holds its "
                                f"mapping; try again when it is done", where=str(self.path)) from None
            if self.path.exists():
                try:
                    self.redactor = Redactor.load(self.path, regions=self.settings.regions)
                except BaseException:
                    self._lock.release()
                    raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._lock is not None:
            self._lock.release()

    def keep(self) -> None:
        if self.path is not None:
            self.redactor.save(self.path)

    def summary(self) -> dict[str, Any]:
        """What `ImportReport.redaction` holds: per kind, occurrences replaced and new values; the mapping file."""
        return {"kinds": self.redactor.summary(), "mapping": str(self.path) if self.path else None}
