"""What an EnvACE run trains and probes on, read once at setup: the episodes (less a held-out probe set), their
packed dual-role streams, the fixed diagnostic streams, the probe's real transitions and the GRPO tasks.

Kept apart from the trainer so the trainer holds one `RunData` instead of a field per list, and so the data a
run sees can be built (and inspected) without a run.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from worldsmith.envace.config import EnvACEConfig, resolve_path
from worldsmith.envace.data import (
    DualRoleSample,
    DualRoleStream,
    EnvErrorOracle,
    Transcript,
    build_streams,
    transcript_from_episode,
)
from worldsmith.envace.probe import ProbeSet, probe_transitions
from worldsmith.envace.rollouts import TaskSpec, task_specs
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.layout import env_family

__all__ = ["HELD_OUT_SPLITS", "RunData", "RunEpisodes", "build_run_data", "episodes_env", "load_episodes",
           "split_episodes"]

_DIAGNOSTIC_STREAMS = 8


def load_episodes(paths: list[str], dataset: str | None, split: str | None, workspace: str | None) -> list[Episode]:
    """Episodes from trace files (config paths, resolved as configs are) and/or a workspace dataset, by split."""
    from worldsmith.workspace.sources import episodes_from

    return episodes_from([resolve_path(path, workspace) for path in paths], dataset=dataset, split=split,
                         workspace=workspace)


HELD_OUT_SPLITS = ("test", "validation", "val", "dev")  # a dataset's held-out splits, the first present is probed


@dataclass
class RunEpisodes:
    """The training episodes, the probe's episodes, where those came from and the environment they are of.

    `probe_source`: held-out (probe files or dataset, a held-out split, held-out families), holdout (the last
    `probe.holdout` episodes by id, taken out of training) or train (training episodes, asked for by
    `probe.source: train`); `probe_split` names the split or share a chart and summary say it used."""

    train: list[Episode]
    probe: list[Episode]
    probe_source: str
    probe_split: str
    env: str | None = None  # the registered environment the episodes are of (None: several or none)


def episodes_env(episodes: list[Episode]) -> str | None:
    """The one environment family of the episodes' environment ids (`bfcl/TicketAPI` -> bfcl); None when they are of
    several or none."""
    families = {env_family(episode.env_id) for episode in episodes} - {""}
    return families.pop() if len(families) == 1 else None


def _held_out_families(episodes: list[Episode], share: float) -> tuple[list[Episode], list[Episode], str]:
    """(training, held-out, what was held out): a stable `share` of the trajectory families (at least one, never
    all)."""
    from worldsmith.worldbook.build import trajectory_family

    families = sorted({trajectory_family(episode) for episode in episodes},
                      key=lambda family: hashlib.sha256(family.encode()).hexdigest())
    if len(families) < 2:
        raise BadInputError("the probe needs held-out episodes and the data has one trajectory family and no "
                            "test/validation split: give probe.paths / probe.dataset, or probe.source: train")
    count = min(len(families) - 1, max(1, round(len(families) * share)))
    held = set(families[:count])
    probe = [episode for episode in episodes if trajectory_family(episode) in held]
    return ([episode for episode in episodes if trajectory_family(episode) not in held], probe,
            f"{count} of {len(families)} trajectory families")


def split_episodes(config: EnvACEConfig) -> RunEpisodes:
    """The configured episodes and the probe's, never a training episode unless `probe.source` is train: its own
    files or dataset, else the last `probe.holdout` episodes by id, else the data's test/validation split (out of
    training), else a `probe.holdout_share` of the trajectory families (out of training)."""
    data, probe = config.data, config.probe
    episodes = load_episodes(data.paths, data.dataset, data.split, config.workspace)
    if data.max_episodes is not None:
        episodes = episodes[: data.max_episodes]
    probe_episodes = load_episodes(probe.paths, probe.dataset, probe.split, config.workspace)
    source, split = "held-out", probe.split or ("given files" if probe.paths else "all")
    if probe_episodes:
        pass  # the probe's own files or dataset, as they are
    elif probe.holdout:
        ordered = sorted(episodes, key=lambda episode: episode.id)
        held = {episode.id for episode in ordered[-probe.holdout:]}
        probe_episodes = [episode for episode in episodes if episode.id in held]
        episodes = [episode for episode in episodes if episode.id not in held]
        source, split = "holdout", f"last {probe.holdout} episodes by id"
    elif probe.source == "train":
        source, split, probe_episodes = "train", data.split or "all", episodes
    else:
        everything = episodes if data.split is None else load_episodes(data.paths, data.dataset, None,
                                                                       config.workspace)
        present = {episode.split for episode in everything}
        held_split = next((name for name in HELD_OUT_SPLITS if name in present and name != data.split), None)
        if held_split is not None:
            probe_episodes = [episode for episode in everything if episode.split == held_split]
            episodes = [episode for episode in episodes if episode.split != held_split]
            split = held_split
        else:
            episodes, probe_episodes, split = _held_out_families(episodes, probe.holdout_share)
    if not episodes:
        raise BadInputError("no training episodes: check data.paths / data.dataset / data.split")
    if not probe_episodes:
        raise BadInputError("no probe episodes: check probe.paths / probe.dataset / probe.split")
    derived = episodes_env(episodes)
    if data.env and derived and data.env != derived:
        raise BadInputError(f"data.env is {data.env!r} but the episodes are of environment {derived!r}: leave data.env "
                            "out (it follows the dataset) or name the dataset's environment")
    return RunEpisodes(episodes, probe_episodes, source, split, data.env or derived)


@dataclass
class RunData:
    """The run's episodes and everything built from them with the policy's tokenizer."""

    episodes: RunEpisodes
    streams: list[DualRoleStream]  # the packed training streams
    diagnostic: list[DualRoleStream]  # a fixed spread of them: the losses before, during and after training
    probe: ProbeSet  # the probe's real transitions (and those skipped for length)
    transcripts: list[Transcript]  # of the training episodes: GRPO's tasks and cached real answers
    specs: list[TaskSpec]

    def counts(self) -> dict[str, int]:
        """How much of each there is (the summary's `data`)."""
        return {"episodes": len(self.episodes.train), "streams": len(self.streams), "tasks": len(self.specs),
                **self.probe.counts(), "diagnostic_streams": len(self.diagnostic)}

    @property
    def probe_samples(self) -> list[DualRoleSample]:
        return self.probe.samples


def build_run_data(config: EnvACEConfig, episodes: RunEpisodes, tokenizer: Any) -> RunData:
    """Streams (invalid calls answered by the real environment when there is one), diagnostics, probe samples
    and GRPO tasks of `episodes`."""
    data = config.data
    oracle = None
    if data.invalid_call_rate > 0 and episodes.env:
        try:
            oracle = EnvErrorOracle(episodes.env)
        except Exception:  # noqa: BLE001 - no real environment here: structured JSON errors instead
            oracle = None
    try:
        streams = build_streams(episodes.train, tokenizer, data, seed=config.seed, oracle=oracle)
    finally:
        if oracle is not None:
            oracle.close()
    if not streams:
        raise BadInputError("the training episodes give no samples (no turns)")
    spread = max(1, len(streams) // _DIAGNOSTIC_STREAMS)
    probe = probe_transitions(episodes.probe, tokenizer, data, n=config.probe.n_transitions)
    transcripts = [transcript_from_episode(episode, max_observation_chars=data.max_observation_chars,
                                           handovers=data.handovers) for episode in episodes.train]
    return RunData(episodes, streams, streams[::spread][:_DIAGNOSTIC_STREAMS], probe, transcripts,
                   task_specs(transcripts))
