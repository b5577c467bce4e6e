"""The on-disk project: datasets as Parquet queried with DuckDB, ingest, splits, export.

Exported: `Workspace` and its `Dataset`s (with `EpisodeFilter`), ingest (`ingest_files`, and `ingest_isolated`:
the same in a child process under a memory limit, what the workbench uses for uploads), redaction on ingest
(`RedactionSettings`, and `DatasetRedaction`: a dataset's redactor with its mapping kept apart), splits,
relabelling, the turn search index and failure tags (`FailureTags`: a label and a note per evaluated turn).
`ingest_isolated` and `IsolatedIngestError` load on first use: their module is also run as
`python -m worldsmith.workspace.isolated_ingest`, which must not find it imported by this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from worldsmith.workspace.dataset import Dataset, DatasetNotFound, EpisodeFilter, EpisodeNotFound, validate_dataset_name
from worldsmith.workspace.env_identity import declared_tool_names, tool_set_env_id
from worldsmith.workspace.failure_tags import FailureKey, FailureTag, FailureTags
from worldsmith.workspace.ingest import IngestProgress, ingest_files
from worldsmith.workspace.layout import WorkspaceLayout, env_family
from worldsmith.workspace.redaction import DatasetRedaction, RedactionSettings
from worldsmith.workspace.relabel import RelabelResult, check_env_id, relabel_env
from worldsmith.workspace.search import (
    IndexStats,
    SearchHit,
    SearchResult,
    build_index,
    has_index,
    search_turns,
    update_index,
)
from worldsmith.workspace.splits import DEFAULT_RATIOS, assign_splits, parse_ratios
from worldsmith.workspace.textmatch import Term, parse_query
from worldsmith.workspace.workspace import Workspace, default_workspace_root, sanitize_filename

__all__ = [
    "DEFAULT_RATIOS",
    "Dataset",
    "DatasetNotFound",
    "DatasetRedaction",
    "EpisodeFilter",
    "EpisodeNotFound",
    "FailureKey",
    "FailureTag",
    "FailureTags",
    "IndexStats",
    "IngestProgress",
    "IsolatedIngestError",
    "RedactionSettings",
    "RelabelResult",
    "SearchHit",
    "SearchResult",
    "Term",
    "Workspace",
    "WorkspaceLayout",
    "assign_splits",
    "build_index",
    "check_env_id",
    "declared_tool_names",
    "default_workspace_root",
    "env_family",
    "has_index",
    "ingest_files",
    "ingest_isolated",
    "parse_query",
    "parse_ratios",
    "relabel_env",
    "sanitize_filename",
    "search_turns",
    "tool_set_env_id",
    "update_index",
    "validate_dataset_name",
]

if TYPE_CHECKING:
    from worldsmith.workspace.isolated_ingest import IsolatedIngestError, ingest_isolated

_LAZY = {"IsolatedIngestError": "worldsmith.workspace.isolated_ingest",
         "ingest_isolated": "worldsmith.workspace.isolated_ingest"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'worldsmith.workspace' has no attribute {name!r}")
