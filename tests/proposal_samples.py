"""Workspaces of the bundled samples with a held-out split and a book built on the rest: where proposals are
tried on real traces (CLI, AppTest and browser tests share them)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BOOK = "alfworld"
# Seed 1 of a 60/40 family split leaves `open.r1` conflicted by one curious turn ("open purple unicorn"): its
# split into two rules makes every held-out `open` turn fit a template, but the simulator's answers do not change
# (they list the contents of a closed receptacle, unknown to any rule before the observation shows them).
SPLIT_SEED = 1
RULE = "open.r1"
# Seed 2 on the BFCL episodes: `check_tire_pressure.r1` fails where the car starts in another scenario (fuel 15.5,
# other pressures); splitting it on the fuel level makes the simulator answer the held-out turns of that scenario
# exactly.
BFCL_BOOK = "bfcl"
BFCL_SEED = 2
BFCL_RULE = "check_tire_pressure.r1"


def build_heldout_workspace(root: Path, *, env: str = "alfworld", book: str = BOOK, seed: int = SPLIT_SEED) -> Path:
    """Import data_samples/ into dataset `samples`, split it 60/40 train/test by family, build `book` from the
    train episodes of `env`."""
    from worldsmith.traces.files import sample_trace_files
    from worldsmith.workspace import Workspace
    from worldsmith.worldbook.build import build_dataset

    workspace = Workspace(root)
    workspace.ingest(sample_trace_files(REPO / "data_samples"), "samples")
    workspace.split("samples", {"train": 0.6, "test": 0.4}, seed=seed)
    build_dataset(workspace, "samples", out=book, split="train", validate_split="test", env=env,
                  message="train split of the bundled samples")
    return root
