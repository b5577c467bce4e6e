"""Keeping rehearsal honest: rehearse held-out real transitions and score them against the real responses.

The probe never scores a truncated reference: a transition whose prompt + real response does not fit
`max_seq_len` is skipped and counted (`ProbeSet.skipped_for_length`). The probe teacher-forces the real history (the rehearse prompt of each held-out transition),
lets the model rehearse the environment's answer greedily, and scores it with the evaluation
metrics (exact match, token F1, normalised edit similarity: `worldsmith.evals.metrics`, else the
simulator's `worldsmith.sim.scoring`; one implementation each, never a copy here). The trainer
runs it every N steps, logs it, can switch from real to imagined rollouts once it passes a
threshold, and flags drift when it falls back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.envace.data import ROLE_REHEARSE, ChatFormat, DualRoleSample, build_samples
from worldsmith.envace.generate import SegmentDecoder
from worldsmith.llm.prompt_lookup import PromptLookup
from worldsmith.traces.model import Episode

__all__ = ["METRICS", "ProbeSet", "metric_functions", "probe_transitions", "rehearsal_fidelity"]

METRICS = ("exact_match", "token_f1", "edit_similarity")


def metric_functions() -> dict[str, Callable[[str, str], float]]:
    """The evaluation metrics (prediction, reference) -> [0, 1], from the one module that defines them."""
    from worldsmith.evals import metrics  # on use: the evals package is heavy and a trainer seldom probes

    return {name: getattr(metrics, name) for name in METRICS}


@dataclass
class ProbeSet:
    """The probe's real transitions, and how many were left out because prompt + reference did not fit
    `max_seq_len` (their reference was cut: a rehearsal scored against `{"` measures nothing)."""

    samples: list[DualRoleSample]
    skipped_for_length: int = 0

    def counts(self) -> dict[str, int]:
        return {"probe_transitions": len(self.samples), "probe_skipped_for_length": self.skipped_for_length}


def probe_transitions(
    episodes: Iterable[Episode], tokenizer: Any, config: Any | None = None, *, n: int = 16
) -> ProbeSet:
    """`n` rehearse samples of real tool steps whose whole reference fits, spread evenly over the episodes'
    transitions; the ones that do not fit are skipped and counted."""
    candidates = [sample for sample in build_samples(episodes, tokenizer, config)
                  if sample.role == "rehearse" and not sample.invalid and sample.turn is not None]
    samples = [sample for sample in candidates if not sample.truncated]
    skipped = len(candidates) - len(samples)
    if len(samples) > n:
        step = len(samples) / n
        samples = [samples[int(index * step)] for index in range(n)]
    return ProbeSet(samples, skipped)


def rehearsal_fidelity(
    model: Any,
    tokenizer: Any,
    transitions: Sequence[DualRoleSample],
    *,
    max_new_tokens: int = 96,
    batch_size: int = 8,
    examples: int = 8,
    lookup: PromptLookup | None = None,
) -> dict[str, Any]:
    """Greedy rehearsals of `transitions` scored against their real responses (`lookup`: prompt-lookup decoding,
    the same text in fewer passes when the answers copy their context).

    Returns the mean of each metric, `n`, and the first `examples` transitions side by side
    (action, real response, rehearsed response, their scores).
    """
    import torch

    fmt = ChatFormat(tokenizer)
    metrics = metric_functions()
    totals = dict.fromkeys(METRICS, 0.0)
    shown: list[dict[str, Any]] = []
    was_training = bool(getattr(model, "training", False))
    model.eval()
    try:
        with torch.inference_mode():
            for start in range(0, len(transitions), batch_size):
                chunk = transitions[start:start + batch_size]
                decoder = SegmentDecoder(model, eos_id=fmt.eos_id, pad_id=fmt.pad_id)
                logits = decoder.start([sample.prompt_ids for sample in chunk])
                outputs = decoder.generate(logits, list(range(len(chunk))), role=ROLE_REHEARSE,
                                           max_new_tokens=max_new_tokens, temperature=0.0, lookup=lookup)
                for row, sample in enumerate(chunk):
                    rehearsed = fmt.decode(outputs[row]).strip()
                    reference = fmt.decode(sample.target_ids).strip()
                    scores = {name: float(function(rehearsed, reference)) for name, function in metrics.items()}
                    for name, value in scores.items():
                        totals[name] += value
                    if len(shown) < examples:
                        shown.append({"episode_id": sample.episode_id, "turn": sample.turn, "action": sample.action,
                                      "real": reference, "rehearsed": rehearsed, **scores})
    finally:
        if was_training:
            model.train()
    count = len(transitions)
    result: dict[str, Any] = {name: (totals[name] / count if count else None) for name in METRICS}
    result["n"] = count
    result["examples"] = shown
    return result
