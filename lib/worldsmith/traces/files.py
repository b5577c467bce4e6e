"""Which files to read: paths as given, folders expanded to the trace files inside them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from functools import partial
from pathlib import Path

__all__ = ["SAMPLE_ASSET_DIRS", "expand_paths", "is_trace_candidate", "sample_trace_files"]

# Files in a folder that are documentation or code, not traces (explicitly named files are always read).
_NOT_TRACES_SUFFIXES = frozenset({".md", ".rst", ".py", ".ipynb", ".toml", ".cfg", ".ini", ".lock", ".license", ".sh"})
_NOT_TRACES_STEMS = ("readme", "license", "licence", "notice", "copying", "changelog")


def is_trace_candidate(path: Path) -> bool:
    """Whether a file found inside a folder should be offered to the importers."""
    if path.name.startswith(".") or path.suffix.lower() in _NOT_TRACES_SUFFIXES:
        return False
    return not path.stem.lower().startswith(_NOT_TRACES_STEMS)


def expand_paths(paths: Iterable[str | Path], unreadable: list[tuple[Path, str]] | None = None) -> list[Path]:
    """Files as given; folders expanded to the trace files inside them (recursively, sorted).

    Inside a folder, hidden files and folders, documentation and code (README, LICENSE, *.md,
    *.py, ...) are skipped; a file named explicitly is always read. A folder that cannot be listed
    (no permission) is never skipped in silence: it goes to `unreadable` as (folder, why), and the
    ingest reports it like an unreadable file.
    """
    out: list[Path] = []
    for item in paths:
        path = Path(item)
        if not path.is_dir():
            out.append(path)
            continue

        found: list[Path] = []
        for folder, folders, files in os.walk(path, onerror=partial(_failed, root=path, unreadable=unreadable)):
            folders[:] = [name for name in folders if not name.startswith(".")]
            found += [Path(folder) / name for name in files if not name.startswith(".")]
        out += [candidate for candidate in sorted(found) if is_trace_candidate(candidate)]
    if unreadable is not None:
        unreadable.sort()
    return out


def _failed(error: OSError, root: Path, unreadable: list[tuple[Path, str]] | None) -> None:
    if unreadable is not None:
        unreadable.append((Path(error.filename or root), error.strerror or str(error)))


# Sub-folders of the bundled samples folder kept out of its import: assets, not traces (ALFWorld game files,
# the tiny model), and the toolshop and AgentDojo traces (their families would reshuffle the samples' seeded split).
SAMPLE_ASSET_DIRS = ("alfworld", "models", "toolshop", "agentdojo")


def sample_trace_files(folder: Path) -> list[Path]:
    """The trace files of a samples folder (`data_samples/` layout): `expand_paths` minus the asset folders."""
    return [path for path in expand_paths([folder]) if path.relative_to(folder).parts[0] not in SAMPLE_ASSET_DIRS]
