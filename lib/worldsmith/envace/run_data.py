"""What an EnvACE run trains and probes on, read once at setup: the episodes (less a held-out probe set), their
packed dual-role streams, the fixed diagnostic streams, the probe's real transitions and the GRPO tasks.

Kept apart from the trainer so the trainer holds one `RunData` instead of a field per list, and so the data a
run sees can be built (and inspected) without a run.
"""

from __future__ import annotations

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
from worldsmith.envace.probe import probe_transitions
from worldsmith.envace.rollouts import TaskSpec, task_specs
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError

__all__ = ["RunData", "RunEpisodes", "build_run_data", "load_episodes", "split_episodes"]

_DIAGNOSTIC_STREAMS = 8


def load_episodes(paths: list[str], dataset: str | None, split: str | None, workspace: str | None) -> list[Episode]:
    """Episodes from trace files (config paths, resolved as configs are) and/or a workspace dataset, by split."""
    from worldsmith.workspace.sources import episodes_from

    return episodes_from([resolve_path(path, workspace) for path in paths], dataset=dataset, split=split,
                         workspace=workspace)


@dataclass
class RunEpisodes:
    """The training episodes, the probe's episodes and where those came from (held-out | holdout | train)."""

    train: list[Episode]
    probe: list[Episode]
    probe_source: str


def split_episodes(config: EnvACEConfig) -> RunEpisodes:
    """The configured episodes; the probe's are its own files, else the last `probe.holdout` training episodes
    by id (taken out of training), else the training episodes themselves."""
    episodes = load_episodes(config.data.paths, config.data.dataset, config.data.split, config.workspace)
    if config.data.max_episodes is not None:
        episodes = episodes[: config.data.max_episodes]
    probe_episodes = load_episodes(config.probe.paths, config.probe.dataset, config.probe.split, config.workspace)
    probe_source = "held-out" if probe_episodes else "train"
    if not probe_episodes and config.probe.holdout:
        ordered = sorted(episodes, key=lambda episode: episode.id)
        held = {episode.id for episode in ordered[-config.probe.holdout:]}
        probe_episodes = [episode for episode in episodes if episode.id in held]
        episodes = [episode for episode in episodes if episode.id not in held]
        probe_source = "holdout"
    if not episodes:
        raise BadInputError("no training episodes: check data.paths / data.dataset / data.split")
    return RunEpisodes(episodes, probe_episodes or episodes, probe_source)


@dataclass
class RunData:
    """The run's episodes and everything built from them with the policy's tokenizer."""

    episodes: RunEpisodes
    streams: list[DualRoleStream]  # the packed training streams
    diagnostic: list[DualRoleStream]  # a fixed spread of them: the losses before, during and after training
    probe_samples: list[DualRoleSample]  # the probe's real transitions
    transcripts: list[Transcript]  # of the training episodes: GRPO's tasks and cached real answers
    specs: list[TaskSpec]

    def counts(self) -> dict[str, int]:
        """How much of each there is (the summary's `data`)."""
        return {"episodes": len(self.episodes.train), "streams": len(self.streams), "tasks": len(self.specs),
                "probe_transitions": len(self.probe_samples), "diagnostic_streams": len(self.diagnostic)}


def build_run_data(config: EnvACEConfig, episodes: RunEpisodes, tokenizer: Any) -> RunData:
    """Streams (invalid calls answered by the real environment when there is one), diagnostics, probe samples
    and GRPO tasks of `episodes`."""
    data = config.data
    oracle = None
    if data.invalid_call_rate > 0 and data.env:
        try:
            oracle = EnvErrorOracle(data.env)
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
    probe_samples = probe_transitions(episodes.probe, tokenizer, data, n=config.probe.n_transitions)
    transcripts = [transcript_from_episode(episode, max_observation_chars=data.max_observation_chars,
                                           handovers=data.handovers) for episode in episodes.train]
    return RunData(episodes, streams, streams[::spread][:_DIAGNOSTIC_STREAMS], probe_samples, transcripts,
                   task_specs(transcripts))
