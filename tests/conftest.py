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


def _format_sample(relative: str, bundled: str, tmp_path: Path) -> Path:
    """A shared format sample (../shared), else its copy in data_samples/, under the shared name."""
    shared = FORMATS / relative
    source = shared if shared.exists() else REPO / "data_samples" / bundled
    target = tmp_path / "format_samples" / shared.name
    target.parent.mkdir(exist_ok=True)
    target.write_bytes(source.read_bytes())
    return target


@pytest.fixture
def ledger_file(tmp_path: Path) -> Path:
    return _format_sample("role_prefixed/ledger_trace.txt", "ledger.role_prefixed.txt", tmp_path)


@pytest.fixture
def awb_file(tmp_path: Path) -> Path:
    return _format_sample("agentworldbench/synthetic_terminal.jsonl", "terminal.agentworldbench.jsonl", tmp_path)


@pytest.fixture
def workspace(tmp_path: Path):
    from worldsmith import Workspace

    return Workspace(tmp_path / "ws")
