"""First start: import the bundled sample traces when the workspace has no datasets, and build a worldbook
of their ALFWorld episodes, so the Worldbook and Simulate pages have something to show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from workbench.components.data import get_workspace
from workbench.components.paths import SAMPLES_DATASET, sample_files, samples_dir
from workbench.components.text import md_code, md_escape
from worldsmith.workspace import Workspace

_attempted: set[tuple[str, str | None]] = set()


@st.cache_resource(show_spinner=False)
def _import_samples_once(root: str, folder: str | None) -> dict[str, Any] | None:
    """Runs once per process, workspace and folder (cache_resource also serialises sessions)."""
    workspace = get_workspace(root)
    if workspace.list_datasets():
        return None
    files = sample_files(Path(folder) if folder else None)
    if not files:
        return None
    summary = workspace.ingest(files, SAMPLES_DATASET).summary()
    summary["worldbook"] = _sample_worldbook(workspace)
    return summary


def _sample_worldbook(workspace: Workspace) -> str | None:
    """Build worldbook `alfworld` from the samples' ALFWorld episodes (cross-fitted, about a second)."""
    from worldsmith.worldbook import WorldbookStore
    from worldsmith.worldbook.build import build_dataset

    if WorldbookStore(workspace.root / "worldbooks").names():
        return None
    dataset = workspace.dataset(SAMPLES_DATASET)
    if not any(env.split("/")[0] == "alfworld" for env in dataset.environments()):
        return None
    outcome = build_dataset(workspace, SAMPLES_DATASET, out="alfworld", env="alfworld", folds=3,
                            message="built from the bundled samples on first start", author="workbench")
    return outcome.version


def ensure_samples(root: str) -> dict[str, Any] | None:
    """Import `data_samples/` (or $WORLDSMITH_SAMPLES; empty disables) into dataset `samples`.

    Only when the workspace has no dataset, and only once per process. Returns the import
    summary on the run that imported, else None. Costs one directory listing on later runs.
    """
    if get_workspace(root).list_datasets():
        return None
    folder = samples_dir()
    key = str(folder.resolve()) if folder is not None else None
    if (root, key) in _attempted:
        return None
    _attempted.add((root, key))
    if not sample_files(folder):
        return None
    with st.spinner("First start: importing the sample traces into dataset `samples`…"):
        try:
            return _import_samples_once(root, key)
        except Exception as error:  # noqa: BLE001 - the workbench must still start
            st.warning(f"Could not import the sample traces from {md_code(folder)}: {md_escape(error)}",
                       icon=":material/warning:")
            return None
