"""The on-disk project: datasets as Parquet queried with DuckDB, ingest, splits, export."""

from worldsmith.traces.files import expand_paths, is_trace_candidate
from worldsmith.workspace.dataset import Dataset, DatasetNotFound, EpisodeFilter, EpisodeNotFound, validate_dataset_name
from worldsmith.workspace.ingest import IngestProgress, declared_tool_names, ingest_files, tool_set_env_id
from worldsmith.workspace.layout import WorkspaceLayout, env_family
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
    "EpisodeFilter",
    "EpisodeNotFound",
    "IndexStats",
    "IngestProgress",
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
    "expand_paths",
    "has_index",
    "ingest_files",
    "tool_set_env_id",
    "is_trace_candidate",
    "parse_query",
    "parse_ratios",
    "relabel_env",
    "sanitize_filename",
    "search_turns",
    "update_index",
    "validate_dataset_name",
]
