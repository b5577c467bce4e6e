"""A dataset's own tiny model: trained on its train split (recorded in the folder), and chosen as the default model
of its model-backed methods; the bundled model only with a warning that says what it was trained on."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from worldsmith import Workspace
from worldsmith._resources import tiny_model_dir
from worldsmith.llm import indomain
from worldsmith.llm.base import Completion, GenerationParams
from worldsmith.llm.cache import ResponseCache, model_identity
from worldsmith.llm.spec import MODEL_ENV_VAR
from worldsmith.llm.tiny import REPORT_FILE, TinyConfig
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.splits import assign_splits

REPO = Path(__file__).resolve().parents[2]
TOOLSHOP = REPO / "data_samples" / "toolshop" / "expert.jsonl"

# A model small enough to train a few steps in about a second on one core.
SMALL = TinyConfig(vocab_size=400, hidden_size=64, intermediate_size=128, num_layers=2, num_heads=2, num_kv_heads=1,
                   context_length=256, seq_len=256, steps=3, warmup_steps=1, max_episodes=8, save_dtype="float32")


@pytest.fixture(autouse=True)
def no_configured_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MODEL_ENV_VAR, raising=False)


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    """A workspace with dataset `shop`: the 30 recorded toolshop expert episodes, split train/test."""
    workspace = Workspace(tmp_path / "ws")
    assert workspace.ingest([TOOLSHOP], "shop").committed
    assign_splits(workspace.dataset("shop"), {"train": 0.7, "test": 0.3})
    return workspace.root


def fake_model(folder: Path, trained_on: dict | None) -> None:
    """A model folder as far as choosing one reads it: config.json, and the training report."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    (folder / REPORT_FILE).write_text(json.dumps({"steps": 1, **({"trained_on": trained_on} if trained_on else {})}),
                                      encoding="utf-8")


def test_without_a_model_of_its_own_the_bundled_one_answers_with_a_warning_and_an_offer(shop: Path) -> None:
    choice = indomain.model_for_dataset(shop, "shop", split="test")
    assert choice is not None and choice.source == "bundled"
    assert choice.spec == f"tiny:{tiny_model_dir()}"
    assert "ALFWorld" in choice.trained_on_label and "ALFWorld" in (choice.warning or "")
    assert choice.offer == "worldsmith llm train-tiny --dataset shop --split train"
    assert choice.to_json()["trained_on_label"] == choice.trained_on_label


def test_no_offer_without_a_train_split(tmp_path: Path) -> None:
    workspace = Workspace(tmp_path / "ws")
    assert workspace.ingest([TOOLSHOP], "shop").committed
    choice = indomain.model_for_dataset(workspace.root, "shop")
    assert choice is not None and choice.source == "bundled" and choice.offer is None
    assert "train-tiny" not in (choice.warning or "")


def test_the_conventional_folder_is_the_default_and_says_what_it_learnt(shop: Path) -> None:
    fake_model(indomain.in_domain_dir(shop, "shop"), {"dataset": "shop", "split": "train", "episodes": 21})
    choice = indomain.model_for_dataset(shop, "shop", split="test")
    assert choice is not None and choice.source == "in-domain" and choice.warning is None
    assert choice.spec == f"tiny:{indomain.in_domain_dir(shop, 'shop')}"
    assert choice.trained_on_label == "dataset shop, split train (21 episodes)"
    # scored on the split it learnt from, or on every split when it learnt from all: said aloud
    assert "which this evaluation scores" in (indomain.model_for_dataset(shop, "shop", split="train").warning or "")
    assert indomain.model_for_dataset(shop, "other") is not None  # another dataset does not get shop's model
    assert indomain.model_for_dataset(shop, "other").source == "bundled"


def test_a_model_trained_on_every_split_is_not_held_out(shop: Path) -> None:
    fake_model(indomain.in_domain_dir(shop, "shop"), {"dataset": "shop", "split": None, "episodes": 30})
    choice = indomain.model_for_dataset(shop, "shop", split="test")
    assert choice is not None and "not held out" in (choice.warning or "")


def test_models_toml_entry_beats_the_folder_and_given_and_env_beat_both(shop: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    fake_model(indomain.in_domain_dir(shop, "shop"), {"dataset": "shop", "split": "train"})
    other = shop / "elsewhere"
    fake_model(other, {"dataset": "shop", "split": "train", "episodes": 5})
    (shop / "models.toml").write_text(f'[models.tiny-shop]\nspec = "tiny:{other}"\n', encoding="utf-8")
    assert indomain.model_for_dataset(shop, "shop").spec == f"tiny:{other}"
    given = indomain.model_for_dataset(shop, "shop", given=f"tiny:{tiny_model_dir()}")
    assert given.source == "given" and "ALFWorld" in given.trained_on_label and given.warning is None
    monkeypatch.setenv(MODEL_ENV_VAR, "openai:some-model@http://127.0.0.1:9/v1")
    configured = indomain.model_for_dataset(shop, "shop")
    assert configured.source == MODEL_ENV_VAR and configured.trained_on is None
    assert configured.trained_on_label.startswith("unknown")


def test_train_on_split_records_the_dataset_and_split(shop: Path) -> None:
    report = indomain.train_on_split(shop, "shop", "train", config=SMALL)
    folder = indomain.in_domain_dir(shop, "shop")
    assert Path(report.out_dir) == folder and (folder / "model.safetensors").is_file()
    train_episodes = sum(1 for _ in Workspace(shop).dataset("shop").iter_episodes("train"))
    assert report.trained_on == {"dataset": "shop", "split": "train", "revision": Workspace(shop).dataset("shop").revision,
                                 "episodes": train_episodes}
    assert indomain.trained_on(f"tiny:{folder}") == report.trained_on  # read back from the folder
    assert indomain.model_for_dataset(shop, "shop", split="test").source == "in-domain"


def test_train_on_a_missing_split_names_the_splits(shop: Path) -> None:
    with pytest.raises(BadInputError, match="no split 'validation'.*test, train"):
        indomain.train_on_split(shop, "shop", "validation", config=SMALL)


@pytest.mark.slow
def test_cli_trains_the_split_into_the_conventional_folder_with_progress(shop: Path) -> None:
    progress = shop / "progress.jsonl"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "worldsmith", "llm", "train-tiny", "--workspace", str(shop),
                             "--dataset", "shop", "--split", "train", "--steps", "2", "--seq-len", "256",
                             "--progress-file", str(progress), "--json"],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["out_dir"] == str(indomain.in_domain_dir(shop, "shop"))
    assert summary["trained_on"]["split"] == "train" and summary["steps"] == 2
    rows = [json.loads(line) for line in progress.read_text().splitlines()]
    assert [row["step"] for row in rows] == [1, 2] and rows[-1]["steps"] == 2


def test_a_model_retrained_into_the_same_folder_is_not_answered_from_the_cache(tmp_path: Path) -> None:
    folder = tmp_path / "tiny-shop"
    fake_model(folder, {"dataset": "shop", "split": "train"})
    (folder / "model.safetensors").write_bytes(b"old weights")
    before = model_identity(f"tiny:{folder}")
    cache = ResponseCache(tmp_path / "cache.sqlite")
    messages = [{"role": "user", "content": "get_user()"}]
    cache.put(f"tiny:{folder}", messages, GenerationParams(), [Completion(text="old answer")], before)
    assert cache.get(f"tiny:{folder}", messages, GenerationParams(), before)[0].text == "old answer"
    (folder / "model.safetensors").write_bytes(b"new weights, retrained")
    os.utime(folder / "model.safetensors", ns=(1, 1))
    after = model_identity(f"tiny:{folder}")
    assert before and after and after != before
    assert cache.get(f"tiny:{folder}", messages, GenerationParams(), after) is None
    assert model_identity("openai:gpt@http://127.0.0.1:9/v1") == ""
