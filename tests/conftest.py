"""Shared fixtures: the shared sample data, a temp workspace, and OpenAI-format conversations."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("WORLDSMITH_SHARED", REPO.parent / "shared"))
FORMATS = SHARED / "data" / "formats"


@pytest.fixture
def ledger_file() -> Path:
    path = FORMATS / "role_prefixed" / "ledger_trace.txt"
    if not path.exists():
        path = REPO / "data_samples" / "ledger.role_prefixed.txt"
    return path


@pytest.fixture
def awb_file() -> Path:
    path = FORMATS / "agentworldbench" / "synthetic_terminal.jsonl"
    if not path.exists():
        path = REPO / "data_samples" / "terminal.agentworldbench.jsonl"
    return path


@pytest.fixture
def workspace(tmp_path: Path):
    from worldsmith import Workspace

    return Workspace(tmp_path / "ws")
