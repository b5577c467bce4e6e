"""The tiny model trainer: chat data from episodes, a loadable Hugging Face folder, determinism."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from worldsmith.llm.tiny import (
    CHAT_TEMPLATE,
    IM_END,
    REPORT_FILE,
    TinyConfig,
    TrainProgress,
    _conversations,
    _documents,
    _encode_chat,
    _pack,
    _Sample,
    _train_tokenizer,
    agent_messages,
    environment_messages,
    render_chat,
    train_tiny,
)

REPO = Path(__file__).resolve().parents[2]


def sample_traces() -> list[Path]:
    """The sample trace files (data_samples/ minus its asset folders: ALFWorld games, models)."""
    from worldsmith.traces.files import sample_trace_files

    return sample_trace_files(REPO / "data_samples")


# A model small enough to train a few steps in about a second on one core.
SMALL = TinyConfig(
    vocab_size=400,
    hidden_size=64,
    intermediate_size=128,
    num_layers=2,
    num_heads=2,
    num_kv_heads=1,
    context_length=256,
    seq_len=256,
    batch_size=4,
    steps=12,
    warmup_steps=2,
    lr=1e-2,
    max_episodes=16,
    save_dtype="float32",
)


@pytest.fixture(scope="module")
def episodes(tmp_path_factory: pytest.TempPathFactory) -> list:
    from worldsmith import Workspace

    workspace = Workspace(tmp_path_factory.mktemp("ws"))
    workspace.ingest(sample_traces(), "samples")
    return list(workspace.dataset("samples").iter_episodes())


@pytest.fixture(scope="module")
def trained(episodes: list, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object, list[TrainProgress]]:
    out = tmp_path_factory.mktemp("models") / "tiny"
    seen: list[TrainProgress] = []
    report = train_tiny(episodes, out, config=SMALL, progress=seen.append)
    return out, report, seen


def test_agent_and_environment_views(episodes: list) -> None:
    episode = next(e for e in episodes if e.env_id and e.env_id.startswith("alfworld") and e.initial_observation)
    agent = agent_messages(episode)
    env = environment_messages(episode)
    assert agent[0]["role"] == "system" and episode.task in agent[0]["content"]
    assert [m["role"] for m in agent[1:]] == ["user", "assistant"] * len(episode.turns)
    assert agent[1]["content"].startswith(episode.initial_observation.text[:40])
    assert agent[2]["content"] == episode.turns[0].action.raw  # the agent answers with the action
    assert env[0]["role"] == "system" and "environment" in env[0]["content"]
    assert env[2]["content"].startswith(episode.initial_observation.text[:40])  # (start) -> opening text
    assert env[3]["content"] == episode.turns[0].action.raw
    assert env[4]["content"].startswith(episode.turns[0].observation.text.strip()[:40])


def test_conversations_follow_the_roles_and_the_episode_limit(episodes: list) -> None:
    both, count, turns = _conversations(episodes, TinyConfig(max_episodes=3))
    assert count == 3 and turns == sum(len(episode.turns) for episode in episodes[:3])
    assert both == [view(e) for e in episodes[:3] for view in (agent_messages, environment_messages) if view(e)]
    only, count, _ = _conversations(episodes, TinyConfig(roles=("environment",), max_message_chars=50))
    assert count == len(episodes) and only == [m for e in episodes if (m := environment_messages(e, max_chars=50))]


def test_assistant_tokens_are_the_training_targets() -> None:
    messages = [
        {"role": "system", "content": "You are the environment."},
        {"role": "user", "content": "open door"},
        {"role": "assistant", "content": "The door opens."},
        {"role": "tool", "name": "ls", "content": "a b"},
    ]
    tokenizer = _train_tokenizer([m["content"] for m in messages] * 4, 300)
    sample = _encode_chat(tokenizer, messages)
    assert tokenizer.decode(sample.ids, skip_special_tokens=False) == render_chat(messages)
    trained = [token for token, keep in zip(sample.ids, sample.train, strict=True) if keep]
    assert tokenizer.decode(trained, skip_special_tokens=False) == "The door opens." + IM_END


def test_document_rows_run_samples_together_with_one_position_count() -> None:
    """Every token once, in order; positions 0..seq_len-1 in each row (so distances up to seq_len are seen);
    labels only on trained tokens; the last row padded, its padding never a target."""
    samples = [_Sample([10 + i] * n, [i % 2 == 0] * n) for i, n in enumerate((5, 9, 3, 5))]
    rows = _documents(samples, 8, pad_id=0)
    assert len(rows) == 3 and all(len(ids) == len(labels) == len(positions) == 8 for ids, labels, positions in rows)
    assert [positions for _, _, positions in rows[:2]] == [list(range(8))] * 2  # across sample boundaries
    assert rows[0] == ([10] * 5 + [11] * 3, [10] * 5 + [-100] * 3, list(range(8)))
    assert rows[1][:2] == ([11] * 6 + [12] * 2, [-100] * 6 + [12] * 2)
    assert rows[2] == ([12] + [13] * 5 + [0, 0], [12] + [-100] * 7, [0, 1, 2, 3, 4, 5, 0, 1])
    packed = _pack(samples, 8, pad_id=0)  # the other packing: each sample from position 0, cut at seq_len
    assert packed[0][2] == list(range(5)) + [0, 1, 2] and max(max(row[2]) for row in packed) < 8


def test_train_tiny_writes_a_loadable_hf_folder(trained: tuple) -> None:
    out, report, seen = trained
    assert (out / "model.safetensors").is_file() and (out / "config.json").is_file()
    assert (out / "generation_config.json").is_file() and (out / "tokenizer.json").is_file()
    assert not list(out.glob("*.bin")) and not list(out.parent.glob(".tiny.*"))  # no pickles, no staging left
    saved = json.loads((out / REPORT_FILE).read_text())
    assert saved["steps"] == report.steps == SMALL.steps
    assert saved["versions"]["torch"] and saved["data"]["episodes"] == SMALL.max_episodes
    assert report.parameters < 200_000 and report.tokens_per_s > 0 and report.seconds > 0
    # loss goes down (first step vs the mean of the last few)
    assert report.last_loss < report.first_loss - 0.5
    assert [p.step for p in seen] == list(range(1, SMALL.steps + 1)) and seen[-1].tokens == report.tokens_trained

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True)
    messages = [{"role": "system", "content": "sys"}, {"role": "user", "content": "look"}]
    text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert text == render_chat(messages, add_generation_prompt=True)
    assert tokenizer.chat_template == CHAT_TEMPLATE
    ids = tokenizer(text, add_special_tokens=False, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        logits = model(input_ids=ids).logits
    assert logits.shape == (1, ids.shape[1], model.config.vocab_size) and torch.isfinite(logits).all()
    assert tokenizer.convert_ids_to_tokens(model.generation_config.eos_token_id) == IM_END


def test_training_is_deterministic_for_a_seed(episodes: list, trained: tuple, tmp_path: Path) -> None:
    out, report, _ = trained
    again = train_tiny(episodes, tmp_path / "again", config=SMALL)
    assert again.losses == report.losses

    def digest(folder: Path) -> str:
        return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()

    assert digest(tmp_path / "again") == digest(out)
    other = train_tiny(episodes, tmp_path / "other", config=TinyConfig(**{**SMALL.__dict__, "seed": 1, "steps": 2}))
    assert other.losses != report.losses[:2]


def test_retraining_replaces_the_folder(episodes: list, tmp_path: Path) -> None:
    out = tmp_path / "m"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    config = TinyConfig(**{**SMALL.__dict__, "steps": 1, "roles": ("environment",)})
    report = train_tiny(episodes, out, config=config)
    assert not (out / "stale.txt").exists() and (out / "model.safetensors").exists()
    assert report.data["conversations"] == report.data["episodes"]


def test_bad_config_and_no_data(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="roles"):
        TinyConfig(roles=("critic",))
    with pytest.raises(ValueError, match="seq_len"):
        TinyConfig(seq_len=2048, context_length=1024)
    with pytest.raises(ValueError, match="rope_theta"):
        TinyConfig(rope_theta=0.0)
    with pytest.raises(ValueError, match="no episodes"):
        train_tiny([], tmp_path / "none", config=SMALL)
    assert not (tmp_path / "none").exists()
