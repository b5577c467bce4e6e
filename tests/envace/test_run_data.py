"""What a run trains and probes on: a probe set held out of training by id, or the training episodes themselves (only
when asked for);
the streams, diagnostics, probe transitions and tasks built from them."""

from __future__ import annotations

from pathlib import Path

import pytest
from envace_support import TINY, small_config

from worldsmith.envace.run_data import build_run_data, split_episodes
from worldsmith.util.errors import BadInputError


def test_the_holdout_leaves_training_and_becomes_the_probe_set(tmp_path: Path) -> None:
    held = split_episodes(small_config(tmp_path, **{"probe.holdout": 2}))
    everything = split_episodes(small_config(tmp_path, **{"probe.source": "train"}))  # asked for by name only
    assert everything.probe_source == "train" and everything.probe == everything.train
    assert everything.probe_split == "all"
    assert held.probe_source == "holdout" and len(held.probe) == 2
    assert {e.id for e in held.probe} == set(sorted(e.id for e in everything.train)[-2:])
    assert {e.id for e in held.train} | {e.id for e in held.probe} == {e.id for e in everything.train}
    assert not {e.id for e in held.train} & {e.id for e in held.probe}


def test_holding_out_every_episode_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="no training episodes: check data.paths"):
        split_episodes(small_config(tmp_path, **{"data.max_episodes": 1, "probe.holdout": 1}))


def test_run_data_counts_what_it_built(tmp_path: Path) -> None:
    from transformers import AutoTokenizer

    config = small_config(tmp_path, **{"probe.holdout": 1, "data.max_episodes": 3, "data.invalid_call_rate": 0.0,
                                       "data.max_seq_len": 1024})  # room for the probe's whole references
    data = build_run_data(config, split_episodes(config), AutoTokenizer.from_pretrained(TINY, local_files_only=True))
    counts = data.counts()
    assert counts["episodes"] == 2 and counts["tasks"] == len(data.transcripts) == 2
    assert counts["streams"] >= 1 and 1 <= counts["diagnostic_streams"] <= min(8, counts["streams"])
    assert all(stream in data.streams for stream in data.diagnostic)
    assert 1 <= counts["probe_transitions"] <= config.probe.n_transitions
    assert counts["probe_skipped_for_length"] == 0
