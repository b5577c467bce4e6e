"""Cached access to the workspace for the workbench pages.

Workspace and Dataset objects are shared per process (st.cache_resource); every query result
is cached (st.cache_data) under a key that includes the workspace root, the dataset name and
the dataset's revision, so a new import invalidates exactly that dataset's entries and large
datasets are only ever read a page at a time.
"""

from __future__ import annotations

from dataclasses import astuple
from pathlib import Path
from typing import Any

import pandas as pd
import streamlit as st

from worldsmith.traces import Episode, Turn
from worldsmith.workspace import Dataset, DatasetNotFound, EpisodeFilter, Workspace, default_workspace_root
from worldsmith.workspace import search_turns as _search_turns

FilterKey = tuple[Any, ...]


def workspace_root() -> str:
    """Absolute workspace root of this process ($WORLDSMITH_WORKSPACE, else ./workspace)."""
    return str(default_workspace_root().resolve())


@st.cache_resource(show_spinner=False)
def get_workspace(root: str) -> Workspace:
    return Workspace(root)


def current_workspace() -> Workspace:
    return get_workspace(workspace_root())


@st.cache_resource(show_spinner=False, max_entries=64)
def _cached_dataset(root: str, name: str) -> Dataset:
    return get_workspace(root).dataset(name)


def open_dataset(root: str, name: str | None) -> Dataset | None:
    """The dataset, or None when there is no such dataset (any more)."""
    if not name:
        return None
    try:
        dataset = _cached_dataset(root, name)
    except (DatasetNotFound, ValueError):
        return None
    if not (dataset.path / "manifest.json").exists():  # deleted behind our back
        _cached_dataset.clear()
        return None
    return dataset


def list_datasets(root: str) -> list[str]:
    return get_workspace(root).list_datasets()


def filter_key(where: EpisodeFilter) -> FilterKey:
    return astuple(where)


# ------------------------------------------------------------------------- cached queries
# Each takes (root, name, revision, ...) so the cache key changes with every commit.


@st.cache_data(show_spinner=False, max_entries=256)
def dataset_stats(root: str, name: str, revision: int) -> dict[str, Any]:
    return _cached_dataset(root, name).stats()


@st.cache_data(show_spinner=False, max_entries=256)
def dataset_facets(root: str, name: str, revision: int) -> tuple[list[str], list[str]]:
    """(environments, splits) of a dataset."""
    dataset = _cached_dataset(root, name)
    return dataset.environments(), dataset.splits()


@st.cache_data(show_spinner=False, max_entries=1024)
def episode_count(root: str, name: str, revision: int, where: FilterKey) -> int:
    return _cached_dataset(root, name).count_episodes(EpisodeFilter(*where))


@st.cache_data(show_spinner=False, max_entries=256)
def episode_page(root: str, name: str, revision: int, where: FilterKey, limit: int, offset: int) -> pd.DataFrame:
    return _cached_dataset(root, name).list_episodes(EpisodeFilter(*where), limit=limit, offset=offset)


@st.cache_data(show_spinner=False, max_entries=512)
def episode_header(root: str, name: str, revision: int, episode_id: str) -> tuple[Episode, int] | None:
    """The episode without its turns (header, initial observation, metadata) and its turn count.

    Dataset.episode() would load every turn; a long episode is paged with turn_page instead.
    """
    try:
        return _cached_dataset(root, name).episode_header(episode_id)
    except KeyError:
        return None


@st.cache_data(show_spinner=False, max_entries=1024)
def turn_count(root: str, name: str, revision: int, episode_id: str, search: str | None) -> int:
    return _cached_dataset(root, name).count_turns(episode_id, search=search or None)


@st.cache_data(show_spinner=False, max_entries=256)
def turn_page(
    root: str, name: str, revision: int, episode_id: str, limit: int, offset: int, search: str | None
) -> list[Turn]:
    return _cached_dataset(root, name).turns_page(episode_id, limit=limit, offset=offset, search=search or None)


@st.cache_data(show_spinner=False, max_entries=256)
def search_turns(root: str, name: str, revision: int, query: str, limit: int, marks: tuple[str, str]) -> dict[str, Any]:
    """Full-text search over the dataset's turns (`SearchResult.to_json()`): ranked hits with snippets."""
    return _search_turns(_cached_dataset(root, name), query, limit=limit, marks=marks).to_json()


@st.cache_data(show_spinner=False, max_entries=1024)
def has_turn(root: str, name: str, revision: int, turn_id: str) -> bool:
    return _cached_dataset(root, name).has_turn(turn_id)


@st.cache_data(show_spinner=False, max_entries=64)
def dataset_reports(root: str, name: str, revision: int) -> list[dict[str, Any]]:
    return _cached_dataset(root, name).reports()


def display_path(path: str | None, root: str | Path | None = None) -> str:
    """A path for display: relative to the workspace root when inside it."""
    if not path:
        return ""
    if root is not None:
        try:
            return str(Path(path).resolve().relative_to(Path(root).resolve()))
        except (ValueError, OSError):
            pass
    return str(path)


@st.cache_data(show_spinner=False, max_entries=64)
def _book_env(root: str, name: str, version: str) -> str | None:
    from worldsmith.worldbook import WorldbookStore

    return WorldbookStore.of_workspace(root).load(name, version).env_id  # versions are immutable


@st.cache_data(show_spinner=False, max_entries=256)
def _book_counts(root: str, name: str, version: str) -> tuple[str | None, int]:
    from worldsmith.worldbook import WorldbookStore

    book = WorldbookStore.of_workspace(root).load(name, version)  # versions are immutable
    return book.env_id, len(book.rules) + len(book.tool_rules)


def book_summary(root: str, name: str) -> dict[str, Any]:
    """One worldbook at a glance (its head version): environment, rules, versions, last change."""
    from worldsmith.worldbook import WorldbookError, WorldbookStore

    store = WorldbookStore.of_workspace(root)
    try:
        head = store.head(name)
        info = store.info(name, head)
        env, rules = _book_counts(root, name, head)
    except (WorldbookError, OSError, ValueError) as error:
        return {"book": name, "environment": "", "rules": None, "version": "", "changed": "", "message": str(error)}
    return {"book": name, "environment": env or "", "rules": rules, "version": head, "changed": info.created,
            "message": info.message}


def book_environments(root: str) -> list[str]:
    """The environment ids the workspace's worldbooks (their head versions) simulate, sorted, each once."""
    from worldsmith.worldbook import WorldbookError, WorldbookStore

    store = WorldbookStore.of_workspace(root)
    envs: set[str] = set()
    for name in store.names():
        try:
            env = _book_env(root, name, store.head(name))
        except (WorldbookError, OSError, ValueError):
            continue
        if env:
            envs.add(env)
    return sorted(envs)
