"""The on-disk project: datasets, import reports, uploads, worldbooks, runs (`workspace.layout` spells the paths)."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from worldsmith.traces.exporters import export_episodes
from worldsmith.traces.import_report import ImportReport
from worldsmith.traces.model import Episode
from worldsmith.util.atomic import atomic_write_bytes
from worldsmith.util.errors import BadInputError
from worldsmith.util.paths import default_workspace_root
from worldsmith.util.staging import sweep_stale
from worldsmith.workspace.dataset import Dataset, DatasetNotFound, validate_dataset_name
from worldsmith.workspace.ingest import ProgressCallback, ingest_files
from worldsmith.workspace.layout import WorkspaceLayout
from worldsmith.workspace.redaction import DatasetRedaction, RedactionSettings
from worldsmith.workspace.relabel import RelabelResult, relabel_env
from worldsmith.workspace.search import IndexStats, SearchResult, build_index, search_turns, update_index
from worldsmith.workspace.splits import assign_splits

__all__ = ["DEFAULT_UPLOAD_LIMIT", "Workspace", "default_workspace_root", "sanitize_filename"]

DEFAULT_UPLOAD_LIMIT = 500 * 1024 * 1024  # matches server.maxUploadSize in .streamlit/config.toml


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def sanitize_filename(name: str) -> str:
    """A safe file name from an uploaded one: no folders, no leading dots, only [A-Za-z0-9._-]."""
    base = name.replace("\\", "/").rsplit("/", 1)[-1]
    base = _UNSAFE.sub("_", base).lstrip("._")[:120]
    return base or "upload"


class Workspace:
    """Entry point of the library for datasets: ingest, browse, split, export."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_workspace_root()
        self.layout = WorkspaceLayout(self.root)
        sweep_stale(self.layout.staging_dir)  # what a killed ingest left

    def __repr__(self) -> str:
        return f"Workspace({str(self.root)!r})"

    @property
    def datasets_dir(self) -> Path:
        return self.layout.datasets_dir

    @property
    def reports_dir(self) -> Path:
        return self.layout.reports_dir

    @property
    def uploads_dir(self) -> Path:
        return self.layout.uploads_dir

    @property
    def books_dir(self) -> Path:
        return self.layout.books_dir

    def list_datasets(self) -> list[str]:
        if not self.datasets_dir.exists():
            return []
        return sorted(p.name for p in self.datasets_dir.iterdir() if (p / "manifest.json").exists())

    def dataset(self, name: str) -> Dataset:
        validate_dataset_name(name)
        path = self.datasets_dir / name
        if not (path / "manifest.json").exists():
            known = ", ".join(self.list_datasets()) or "none yet"
            raise DatasetNotFound(f"no dataset {name!r} in workspace {self.root} (datasets: {known})")
        return Dataset(path)

    def ingest(
        self,
        paths: Iterable[str | Path],
        dataset: str,
        *,
        format: str | None = None,
        strict: bool = False,
        progress: ProgressCallback | None = None,
        env: str | None = None,
        redact: RedactionSettings | None = None,
    ) -> ImportReport:
        """Import trace files (any supported format, auto-detected) into `dataset`; episodes naming no
        environment get `env`, else one derived from their file's tool set. `redact`: personal data replaced by
        the dataset's pseudonyms (`workspace.redaction`)."""
        return ingest_files(self.root, paths, dataset, format=format, strict=strict, progress=progress, env=env,
                            redact=redact)

    def split(self, dataset: str, ratios: dict[str, float] | None = None, *, seed: int = 0) -> dict[str, Any]:
        return assign_splits(self.dataset(dataset), ratios, seed=seed)

    def relabel(self, dataset: str, env: str, *, only: Iterable[str | None] | None = None) -> RelabelResult:
        """Give `dataset`'s episodes (all, or those of the environments in `only`; None: those naming none) the
        environment id `env` (`relabel.relabel_env`)."""
        return relabel_env(self.dataset(dataset), env, only=only)

    def search(self, dataset: str, query: str, *, limit: int = 20) -> SearchResult:
        """Turns of `dataset` holding every term of `query` (case-insensitive substrings; "a phrase" keeps its
        spaces), ranked, with snippets and turn links."""
        return search_turns(self.dataset(dataset), query, limit=limit)

    def index(self, dataset: str, *, rebuild: bool = False) -> IndexStats:
        """Bring `dataset`'s full-text index up to date (new parts only), or rebuild it whole."""
        data = self.dataset(dataset)
        return build_index(data) if rebuild else update_index(data)

    def export(self, dataset: str, format: str, out: str | Path, *, split: str | None = None) -> int:
        return export_episodes(self.dataset(dataset).iter_episodes(split=split), format, Path(out))

    def add_episodes(self, dataset: str, episodes: Iterable[Episode], *, label: str = "episodes",
                     redact: RedactionSettings | None = None) -> ImportReport:
        """Store episodes built in code (a played session, a collection) in `dataset`, like an import.

        They are written as native JSONL under `<root>/recorded/` first (kept: it is the source
        their provenance points to), then ingested with the usual checks and dedupe. With `redact` they are
        redacted before that file is written, so no copy of their personal data stays in the workspace.
        """
        if redact is None:
            return self.ingest([self._record(episodes, label)], dataset, format="native")
        with DatasetRedaction(self.root, dataset, redact) as redaction:
            target = self._record((redaction.redactor.redact_episode(e) for e in episodes), label)
            redaction.keep()  # before the commit: no committed pseudonym is ever missing from it
            report = self.ingest([target], dataset, format="native")
        report.redaction = redaction.summary()
        return report

    def _record(self, episodes: Iterable[Episode], label: str) -> Path:
        """Episodes written as native JSONL under `<root>/recorded/`."""
        target = self.layout.recorded_dir / f"{secrets.token_hex(4)}-{sanitize_filename(label)}.jsonl"
        if export_episodes(episodes, "jsonl", target) == 0:
            target.unlink(missing_ok=True)
            raise BadInputError("no episodes to add")
        return target

    def save_upload(self, filename: str, data: bytes, *, limit: int = DEFAULT_UPLOAD_LIMIT) -> Path:
        """Store an uploaded file inside the workspace under a sanitised, unique name."""
        if len(data) > limit:
            raise BadInputError(f"{filename}: upload is {len(data)} bytes, over the limit of {limit} bytes")
        # A fresh folder per upload keeps the file's own name: ids derived from it (`<stem>-<n>`) carry no prefix.
        target = self.uploads_dir / secrets.token_hex(4) / sanitize_filename(filename)
        atomic_write_bytes(target, data)
        return target
