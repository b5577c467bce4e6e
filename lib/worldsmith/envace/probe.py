"""Keeping rehearsal honest: rehearse held-out real transitions and score them against the real responses.

The probe teacher-forces the real history (the rehearse prompt of each held-out transition),
lets the model rehearse the environment's answer greedily, and scores it with the evaluation
metrics (exact match, token F1, normalised edit similarity: `worldsmith.evals.metrics`, else the
simulator's `worldsmith.sim.scoring`; one implementation each, never a copy here). The trainer
runs it every N steps, logs it, can switch from real to imagined rollouts once it passes a
threshold, and flags drift when it falls back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from worldsmith.envace.data import ROLE_REHEARSE, ChatFormat, DualRoleSample, build_samples
from worldsmith.envace.generate import SegmentDecoder
from worldsmith.llm.prompt_lookup import PromptLookup
from worldsmith.traces.model import Episode

__all__ = ["METRICS", "metric_functions", "probe_transitions", "rehearsal_fidelity"]

METRICS = ("exact_match", "token_f1", "edit_similarity")


def metric_functions() -> dict[str, Callable[[str, str], float]]:
    """The evaluation metrics (prediction, reference) -> [0, 1], from the one module that defines them."""
    from worldsmith.evals import metrics  # on use: the evals package is heavy and a trainer seldom probes

    return {name: getattr(metrics, name) for name in METRICS}


def probe_transitions(
    episodes: Iterable[Episode], tokenizer: Any, config: Any | None = None, *, n: int = 16
) -> list[DualRoleSample]:
    """`n` rehearse samples of real tool steps, spread evenly over the episodes' transitions."""
    samples = [sample for sample in build_samples(episodes, tokenizer, config)
               if sample.role == "rehearse" and not sample.invalid and sample.turn is not None]
    if len(samples) <= n:
        return samples
    step = len(samples) / n
    return [samples[int(index * step)] for index in range(n)]


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
