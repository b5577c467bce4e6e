"""Prompt-lookup (n-gram) speculative decoding: draft by copying from the context, verify in one pass.

A tool's answer is mostly a copy of text already in the context (file names from an earlier
listing, a record fetched before, ids from the call), and on a CPU one generated token costs
about as much as eight prefilled ones. So instead of one forward pass per token, a decoder

1. drafts up to `draft` tokens: the tokens that followed the latest earlier occurrence of the
   context's last n-gram (`ngram` tokens, else fewer, down to one; `NgramIndex`);
2. runs the last emitted token and the draft through the model in one pass (the decoders own that);
3. keeps the longest prefix of the draft the model agrees with, plus the model's own next token at
   the first disagreement (`accept_greedy`, `accept_sampled`), so every pass yields at least one token.

Greedy outputs are those of plain decoding (up to floating-point reassociation of the batched
pass); sampled outputs keep their distribution exactly: a draft token d is a point-mass proposal,
accepted with probability p(d) under the processed target distribution p, and on rejection the
token comes from the residual (p with d removed, renormalised), the standard speculative rule.

This module is the one implementation; the training decoder (`worldsmith.envace.generate`) and the
`hf` backend (`worldsmith.llm.hf`) call it. transformers' own `prompt_lookup_num_tokens` is not
used by the hf backend: it runs inside `generate`, which knows neither the backend's prefix cache
layout (padded rows, 4-D masks, explicit positions) nor its per-completion seeded generators and
stop strings. vLLM has its own (`speculative_config` method "ngram"), which `vllm_backend` passes on.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.util.errors import BadInputError

__all__ = [
    "LookupStats",
    "NgramIndex",
    "PromptLookup",
    "accept_greedy",
    "accept_rows",
    "accept_sampled",
    "target_probs",
]


@dataclass(frozen=True)
class PromptLookup:
    """Settings: on/off, tokens drafted per pass, longest n-gram matched."""

    enabled: bool = True
    draft: int = 8
    ngram: int = 3

    def __post_init__(self) -> None:
        if not isinstance(self.draft, int) or isinstance(self.draft, bool) or self.draft < 1:
            raise BadInputError(f"prompt lookup: the draft length must be an integer of at least 1, not {self.draft!r}")
        if not isinstance(self.ngram, int) or isinstance(self.ngram, bool) or self.ngram < 1:
            raise BadInputError(f"prompt lookup: the n-gram size must be an integer of at least 1, not {self.ngram!r}")

    @classmethod
    def from_options(cls, options: Mapping[str, Any], default: PromptLookup | None = None) -> PromptLookup:
        """From backend spec options `prompt_lookup` (on/off), `lookup_draft`, `lookup_ngram`; unset ones keep
        `default`'s."""
        base = default or cls()
        enabled = options.get("prompt_lookup", base.enabled)
        if not isinstance(enabled, bool):
            raise BadInputError(f"prompt_lookup must be true or false, not {enabled!r}")
        return cls(enabled, options.get("lookup_draft", base.draft), options.get("lookup_ngram", base.ngram))


@dataclass
class LookupStats:
    """What lookup decoding did: verify passes (per row), tokens they emitted, tokens drafted and accepted."""

    passes: int = 0
    tokens: int = 0
    drafted: int = 0
    accepted: int = 0

    @property
    def tokens_per_pass(self) -> float:
        """Tokens each row got from one verify pass (1.0: no better than plain decoding)."""
        return self.tokens / self.passes if self.passes else 0.0

    def record(self, drafted: int, accepted: int, tokens: int) -> None:
        """One row's verify pass: its draft length, the draft tokens the model agreed with, the tokens it took."""
        self.passes += 1
        self.tokens += tokens
        self.drafted += drafted
        self.accepted += accepted

    def add(self, other: LookupStats) -> None:
        for name in ("passes", "tokens", "drafted", "accepted"):
            setattr(self, name, getattr(self, name) + getattr(other, name))


class NgramIndex:
    """The latest continuation of every n-gram (sizes 1..`ngram`) of a growing token sequence.

    Built incrementally: each query indexes only the tokens added since the last one, so drafting
    costs a few dict look-ups per pass whatever the context length. The sequence must only grow.
    """

    def __init__(self, ngram: int) -> None:
        self.ngram = ngram
        self.tables: list[dict[tuple[int, ...], int]] = [{} for _ in range(ngram)]
        self.seen = 0  # continuations indexed: those starting before this position

    def draft(self, tokens: Sequence[int], length: int, stop: Collection[int] = ()) -> list[int]:
        """Up to `length` tokens that followed the latest earlier occurrence of the longest matching suffix
        n-gram, cut before the first `stop` token (an end of turn is never drafted: decoders emit it themselves).

        A copy that runs into the end of the context continues with what it copied (LZ77's overlapping copy):
        a period-p repeat ("a b a b a") drafts its continuation ("b a b ...") instead of one token.
        """
        if length < 1 or len(tokens) < 2:
            return []
        if len(tokens) < self.seen:
            raise ValueError("NgramIndex: the token sequence shrank")
        for start in range(max(self.seen, 1), len(tokens)):
            for size in range(1, min(self.ngram, start) + 1):
                self.tables[size - 1][tuple(tokens[start - size : start])] = start
        self.seen = len(tokens)
        for size in range(min(self.ngram, len(tokens) - 1), 0, -1):
            found = self.tables[size - 1].get(tuple(tokens[len(tokens) - size :]))
            if found is None:
                continue
            out: list[int] = []
            end = len(tokens)
            while len(out) < length:  # a copy that reaches the end goes on from its own start (a repeat repeats)
                token = tokens[found + len(out)] if found + len(out) < end else out[found + len(out) - end]
                if token in stop:
                    break
                out.append(token)
            return out
        return []


def target_probs(logits: Any, temperature: float, top_p: float = 1.0) -> Any:
    """The sampling distribution (…, V) of `logits`: temperature, then nucleus (top-p; the top token always stays)."""
    import torch

    probs = torch.softmax(logits / temperature, dim=-1)
    if top_p < 1.0:
        ordered, order = probs.sort(dim=-1, descending=True)
        drop = ordered.cumsum(dim=-1) - ordered > top_p
        ordered = ordered.masked_fill(drop, 0.0)
        probs = torch.zeros_like(probs).scatter_(-1, order, ordered)
        probs = probs / probs.sum(dim=-1, keepdim=True)
    return probs


def accept_greedy(draft: Sequence[int], logits: Any) -> list[int]:
    """Greedy verification: the draft's longest prefix equal to the argmax, then the argmax after it.

    `logits` (len(draft) + 1, V): row i scores the token after the context plus draft[:i].
    """
    best = logits.argmax(dim=-1).tolist()
    n = 0
    while n < len(draft) and draft[n] == best[n]:
        n += 1
    return [*draft[:n], best[n]]


def accept_sampled(draft: Sequence[int], probs: Any, generator: Any = None) -> list[int]:
    """Speculative sampling with a point-mass draft: each emitted token is distributed as `probs` says.

    `probs` (len(draft) + 1, V), rows as in `accept_greedy`. Draft token i is kept with probability
    probs[i, d_i]; the first one rejected is replaced by a sample of probs[i] with d_i removed
    (renormalised); when all are kept, one more token comes from the last row.
    """
    import torch

    k = len(draft)
    n = 0
    if k:
        ids = torch.tensor(list(draft), dtype=torch.long, device=probs.device)
        kept = probs[torch.arange(k, device=probs.device), ids]
        uniform = torch.rand(k, generator=generator, device=probs.device, dtype=kept.dtype)
        rejected = (uniform >= kept).nonzero()
        n = int(rejected[0]) if len(rejected) else k
    if n < k:
        residual = probs[n].clone()
        residual[draft[n]] = 0.0
        if not bool(residual.sum() > 0):  # p(d) rounds to 1: rejecting it had probability ~0
            return list(draft[: n + 1])
        token = int(torch.multinomial(residual, 1, generator=generator))  # multinomial renormalises
    else:
        token = int(torch.multinomial(probs[k], 1, generator=generator))
    return [*draft[:n], token]


def accept_rows(drafts: Sequence[Sequence[int]], scores: Any, *, sample: bool, generators: Any = None) -> list[list[int]]:
    """The tokens each row of a verify pass emits; `scores` (rows, columns, V) are logits (greedy) or the target
    probabilities (sampling) of each row's last token and its draft.

    Rows without a draft take one token, all in one call (with one generator, exactly as plain decoding
    draws them, so a decoder with lookup off samples what it sampled before). `generators`: None (torch's
    global one), one generator for all rows, or a list with one per row (seeded completions).
    """
    import torch

    per_row = isinstance(generators, list | tuple)
    plain = [row for row, draft in enumerate(drafts) if not draft]
    out: list[list[int]] = [[] for _ in drafts]
    if plain and not (sample and per_row):
        first = scores[plain, 0]
        chosen = torch.multinomial(first, 1, generator=generators).squeeze(1) if sample else first.argmax(dim=-1)
        for row, token in zip(plain, chosen.tolist(), strict=True):
            out[row] = [token]
    for row, draft in enumerate(drafts):
        if not sample and draft:
            out[row] = accept_greedy(draft, scores[row, : len(draft) + 1])
        elif sample and (draft or per_row):
            out[row] = accept_sampled(draft, scores[row, : len(draft) + 1], generators[row] if per_row else generators)
    return out
