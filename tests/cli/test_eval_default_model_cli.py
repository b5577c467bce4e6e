"""`worldsmith eval` without `--llm` for model-backed methods: the dataset's own tiny model when it has one, else the
bundled model with a printed warning (in `--json` too) that it was trained on ALFWorld-like text; the report says
which model answered and what it learnt from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldsmith import Workspace
from worldsmith.llm import indomain
from worldsmith.llm.spec import MODEL_ENV_VAR
from worldsmith.llm.tiny import TinyConfig
from worldsmith.workspace.splits import assign_splits

pytestmark = [pytest.mark.slow, pytest.mark.integration]  # `python -m worldsmith eval` on a real tiny model

REPO = Path(__file__).resolve().parents[2]
TOOLSHOP = REPO / "data_samples" / "toolshop" / "expert.jsonl"
SMALL = TinyConfig(vocab_size=400, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=2, num_kv_heads=1,
                   context_length=1024, seq_len=256, steps=2, warmup_steps=1, max_episodes=8, save_dtype="float32")


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """Dataset `shop` (the toolshop expert runs) split train/test, and worldbook `shop` built on train."""
    from worldsmith.sim.route_learning import build_simulator_book
    from worldsmith.worldbook import WorldbookStore

    workspace = Workspace(tmp_path / "ws")
    assert workspace.ingest([TOOLSHOP], "shop").committed
    dataset = workspace.dataset("shop")
    assign_splits(dataset, {"train": 0.7, "test": 0.3})
    book = build_simulator_book(list(dataset.iter_episodes("train")), name="shop").book
    WorldbookStore(workspace.root / "worldbooks").save(book, sources=[{"dataset": "shop", "split": "train"}])
    return workspace.root


def evaluate(root: Path, run: str) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != MODEL_ENV_VAR} | {"HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", "eval", "--workspace", str(root), "--book", "shop",
                             "--dataset", "shop", "--split", "test", "--methods", "direct", "--protocol", "next-obs",
                             "--max-episodes", "1", "--max-turns", "1", "--resamples", "100", "--out", run, "--json"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def test_the_bundled_default_is_named_and_warned_about(shop: Path) -> None:
    out, stderr = evaluate(shop, "bundled")
    model = out["model"]
    assert model["source"] == "bundled" and model["spec"].endswith("data_samples/models/tiny")
    assert "ALFWorld" in model["warning"] and "worldsmith llm train-tiny --dataset shop --split train" in model["warning"]
    assert "warning:" in stderr and "ALFWorld" in stderr
    report = json.loads(Path(out["report"]).read_text())
    assert "ALFWorld" in report["models"]["direct"]["trained_on"]
    assert "of the bundled sample traces (113 episodes, mostly ALFWorld" in Path(out["markdown"]).read_text()


def test_the_datasets_own_model_answers_when_it_exists(shop: Path) -> None:
    indomain.train_on_split(shop, "shop", "train", config=SMALL)
    out, stderr = evaluate(shop, "own")
    model = out["model"]
    assert model["source"] == "in-domain" and model["warning"] is None and "warning:" not in stderr
    assert model["spec"] == f"tiny:{indomain.in_domain_dir(shop, 'shop')}"
    assert model["trained_on"]["dataset"] == "shop" and model["trained_on"]["split"] == "train"
    assert "of dataset shop, split train" in Path(out["markdown"]).read_text()
