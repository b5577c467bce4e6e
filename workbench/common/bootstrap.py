"""First start: import the bundled sample traces when the workspace has no datasets, split them into
train/validation/test by trajectory family, and build worldbook `alfworld` from the ALFWorld episodes of
the train split only, so the Worldbook and Simulate pages have something to show and the first evaluation
a newcomer launches (on the held-out `test` split) runs without a leakage refusal.

Deterministic (a fixed seed and ratios); the same as, in a terminal:

    worldsmith split --dataset samples --ratios train=0.7,validation=0.1,test=0.2 --seed 0
    worldsmith build samples --split train --env alfworld --out alfworld
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import streamlit as st

from workbench.common.data import get_workspace
from workbench.common.paths import SAMPLES_DATASET, sample_files, samples_dir
from workbench.common.text import md_code, md_escape
from worldsmith.workspace import Workspace, env_family

_attempted: set[tuple[str, str | None]] = set()
SAMPLE_RATIOS = {"train": 0.7, "validation": 0.1, "test": 0.2}  # enough held-out ALFWorld games to evaluate
SAMPLE_SEED = 0
SAMPLE_BOOK = "alfworld"
HELD_OUT_SPLIT = "test"


@st.cache_resource(show_spinner=False)
def _import_samples_once(root: str, folder: str | None) -> dict[str, Any] | None:
    """Runs once per process, workspace and folder (cache_resource also serialises sessions)."""
    workspace = get_workspace(root)
    if workspace.list_datasets():
        return None
    return import_samples(workspace, Path(folder) if folder else None)


def import_samples(workspace: Workspace, folder: Path | None) -> dict[str, Any] | None:
    """What a first start does to an empty `workspace`: ingest the sample trace files of `folder` as dataset
    `samples`, split it, build worldbook `alfworld` on its train split; the import summary (None: no files).
    Public so tests and `benchmarks/page_load.py` open the pages on the very workspace a newcomer gets."""
    files = sample_files(folder)
    if not files:
        return None
    summary = workspace.ingest(files, SAMPLES_DATASET).summary()
    summary["splits"] = workspace.split(SAMPLES_DATASET, SAMPLE_RATIOS, seed=SAMPLE_SEED)["splits"]
    summary["worldbook"] = _sample_worldbook(workspace)
    return summary


def _sample_worldbook(workspace: Workspace) -> str | None:
    """Build worldbook `alfworld` from the samples' train-split ALFWorld episodes, validated on the validation
    split (about a second); the test split stays out of it for evaluation."""
    from worldsmith.sim import SIMULATOR_STAGES
    from worldsmith.worldbook import WorldbookStore, build_dataset

    if WorldbookStore.of_workspace(workspace).names():
        return None
    dataset = workspace.dataset(SAMPLES_DATASET)
    if not any(env_family(env) == "alfworld" for env in dataset.environments()):
        return None
    outcome = build_dataset(
        workspace,
        SAMPLES_DATASET,
        out=SAMPLE_BOOK,
        split="train",
        env="alfworld",
        message=f"built from the bundled samples' train split on first start (held out: {HELD_OUT_SPLIT})",
        author="workbench",
        stages=SIMULATOR_STAGES,
    )
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
            st.warning(
                f"Could not import the sample traces from {md_code(folder)}: {md_escape(error)}",
                icon=":material/warning:",
            )
            return None
