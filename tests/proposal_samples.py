"""A workspace of the bundled samples with a held-out split and a book built on the rest: where proposals are
tried on real traces (CLI, AppTest and browser tests share it)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOK = "alfworld"
# Seed 1 of a 60/40 family split leaves `open.r1` conflicted by one curious turn ("open purple unicorn"): its
# split into two rules makes every held-out `open` turn fit a template.
SPLIT_SEED = 1
RULE = "open.r1"


def build_heldout_workspace(root: Path) -> Path:
    """Import data_samples/ into dataset `samples`, split it train/test by family, build `alfworld` on train."""
    from worldsmith.traces.files import sample_trace_files
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook.build import BuildConfig, build_dataset

    workspace = Workspace(root)
    workspace.ingest(sample_trace_files(REPO / "data_samples"), "samples")
    workspace.split("samples", {"train": 0.6, "test": 0.4}, seed=SPLIT_SEED)
    build_dataset(workspace, "samples", out=BOOK, split="train", validate_split="test", env="alfworld",
                  config=BuildConfig(route_folds=0), message="train split of the bundled samples")
    return root
