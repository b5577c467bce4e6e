"""An honest probe: by default its episodes are held out of training (a test/validation split, else held-out
trajectory families) and it says which; a transition whose prompt + real response does not fit `max_seq_len` is
skipped and counted, never scored against a cut reference; `data.env` follows the episodes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from envace_support import TINY, bfcl_episodes
from envace_support import small_config as _small_config

from worldsmith.envace import probe as probe_module
from worldsmith.envace.config import DataConfig, ProbeConfig
from worldsmith.envace.data import ChatFormat
from worldsmith.envace.probe import probe_transitions, rehearsal_fidelity
from worldsmith.envace.run_data import build_run_data, split_episodes
from worldsmith.util.errors import BadInputError
from worldsmith.worldbook.build import trajectory_family


def small_config(out: Path, **fields: Any) -> Any:
    """The tests' small config with the probe's own default source (the shared one probes training episodes)."""
    return _small_config(out, **{"probe.source": ProbeConfig.model_fields["source"].default, **fields})


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(TINY, local_files_only=True)


class _RehearsesNothing:
    """The decoder of a model whose every rehearsal is empty (it ends its turn at once): the probe logic is what is
    tested, so the model's output is fixed."""

    def __init__(self, model: Any, *, eos_id: int, pad_id: int, **_: Any) -> None:
        self.eos_id = eos_id

    def start(self, prompts: Sequence[list[int]]) -> list[int]:
        return [0] * len(prompts)

    def generate(self, logits: list[int], rows: list[int], **_: Any) -> list[list[int]]:
        return [[self.eos_id] for _ in rows]


class _Model:
    training = False

    def eval(self) -> None:
        return None


@pytest.mark.parametrize("max_seq_len", [DataConfig.model_fields["max_seq_len"].default, 512])  # config, form
def test_with_the_defaults_a_model_that_rehearses_nothing_scores_zero_on_held_out_episodes(
        tmp_path: Path, tokenizer: Any, monkeypatch: pytest.MonkeyPatch, max_seq_len: int) -> None:
    config = small_config(tmp_path, **{"probe.n_transitions": 16, "data.max_seq_len": max_seq_len})
    episodes = split_episodes(config)  # the default probe: no probe data, no holdout count
    assert episodes.probe_source == "held-out" and episodes.probe_split == "1 of 6 trajectory families"
    train_ids, probe_ids = {e.id for e in episodes.train}, {e.id for e in episodes.probe}
    assert probe_ids and not train_ids & probe_ids  # never a training episode
    assert not {trajectory_family(e) for e in episodes.train} & {trajectory_family(e) for e in episodes.probe}
    data = build_run_data(config, episodes, tokenizer)
    counts = data.counts()
    assert not any(sample.truncated for sample in data.probe_samples)

    monkeypatch.setattr(probe_module, "SegmentDecoder", _RehearsesNothing)
    result = rehearsal_fidelity(_Model(), tokenizer, data.probe_samples)
    assert result["n"] == counts["probe_transitions"] == len(data.probe_samples)
    if counts["probe_transitions"]:
        assert result["exact_match"] == result["token_f1"] == result["edit_similarity"] == 0.0
        assert all(example["rehearsed"] == "" and example["real"].strip("{}[]()\"' ") for example in result["examples"])
    else:  # every held-out transition is longer than max_seq_len: nothing scored, and said so, never a cut reference
        assert counts["probe_skipped_for_length"] > 0
        assert result["exact_match"] is None and result["token_f1"] is None


def test_a_transition_too_long_for_max_seq_len_is_skipped_and_counted(tmp_path: Path, tokenizer: Any) -> None:
    episodes = bfcl_episodes()
    short = small_config(tmp_path, **{"data.max_seq_len": 256}).data
    probed = probe_transitions(episodes, tokenizer, short, n=1000)
    assert probed.skipped_for_length > 0 and probed.counts()["probe_skipped_for_length"] == probed.skipped_for_length
    fmt = ChatFormat(tokenizer)
    observations = {(e.id, t.index): t.observation.text for e in episodes for t in e.turns}
    for sample in probed.samples:  # each scored reference is the whole real response
        assert not sample.truncated and len(sample.prompt_ids) + len(sample.target_ids) <= short.max_seq_len
        assert sample.target_ids[-1] == fmt.eos_id
    roomy = probe_transitions(episodes, tokenizer, small_config(tmp_path, **{"data.max_seq_len": 8192}).data, n=1000)
    assert roomy.skipped_for_length == 0
    assert len(roomy.samples) == len(probed.samples) + probed.skipped_for_length
    assert observations  # the episodes have turns to probe


def test_the_probe_takes_the_test_split_when_the_data_has_one(tmp_path: Path) -> None:
    episodes = bfcl_episodes()
    path = tmp_path / "split.jsonl"
    path.write_text("".join(e.model_copy(update={"split": "test" if i < 2 else "train"}).model_dump_json() + "\n"
                            for i, e in enumerate(episodes)), encoding="utf-8")
    config = small_config(tmp_path, **{"data.paths": [str(path)]})
    split = split_episodes(config)
    assert split.probe_source == "held-out" and split.probe_split == "test"
    assert {e.id for e in split.probe} == {e.id for e in episodes[:2]}
    assert not {e.id for e in split.train} & {e.id for e in split.probe}
    trained = split_episodes(small_config(tmp_path, **{"data.paths": [str(path)], "data.split": "train"}))
    assert trained.probe_split == "test" and len(trained.train) == len(episodes) - 2


def test_data_env_follows_the_episodes(tmp_path: Path) -> None:
    assert split_episodes(small_config(tmp_path, **{"data.env": None})).env == "bfcl"
    with pytest.raises(BadInputError, match="data.env is 'alfworld' but the episodes are of environment 'bfcl'"):
        split_episodes(small_config(tmp_path, **{"data.env": "alfworld"}))
