"""Batched generation on one key/value cache, in the dual-role stream layout.

Rows (rollouts) grow token streams in the layout of `worldsmith.envace.data`: the agent's view,
and rehearse segments inserted after an action. A rehearse step appends its environment header
to the cache the act step left behind, so the whole history is *reused*, never recomputed; the
next observation is appended to the agent's view, and the attention mask (`segment_allowed`)
hides the segment from everything after it. Each row also keeps its own compact stream
(tokens, positions, segments, labels, roles), which is exactly what training scores later.

Rows are right-aligned per fed chunk (padding columns are invalid keys), carry explicit position
ids, and leave the batch when their episode ends (`keep`). Sampling uses one seeded
`torch.Generator`, so a run reproduces (and resumes) exactly.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.envace.data import IGNORE, ROLE_NONE, DualRoleStream
from worldsmith.envace.modeling import additive_mask, segment_allowed

__all__ = ["DecodeStats", "SegmentDecoder"]


@dataclass
class DecodeStats:
    """What the decoder computed: tokens run through the model, generated, and served from the cache."""

    forward_tokens: int = 0
    generated_tokens: int = 0
    reused_tokens: int = 0  # history a rehearse step (or a copied prompt) took from the cache instead of recomputing
    forward_calls: int = 0


@dataclass
class _Row:
    stream: DualRoleStream
    position: int = 0  # next position in the agent's view
    segment: int = 0  # the open segment (0: the agent's view)
    segment_position: int = 0
    segments_used: int = 0
    logprobs: list[float] = field(default_factory=list)  # sampling log-probs of generated target tokens
    pending: list[tuple[int, int, int]] = field(default_factory=list)  # generated, not yet fed to the model


class SegmentDecoder:
    """Decodes many rows over one cache; rows are addressed by their index in `rows`."""

    def __init__(self, model: Any, *, eos_id: int, pad_id: int, generator: Any | None = None,
                 reserve: int = 256) -> None:
        import torch

        self.torch = torch
        self.model = model
        self.eos_id, self.pad_id = eos_id, pad_id
        self.generator = generator
        self.reserve = reserve  # spare cache positions allocated at a time
        self.device = next(model.parameters()).device
        dtype = next(model.parameters()).dtype
        self.mask_dtype = dtype if dtype.is_floating_point else torch.float32
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.key_valid: Any = None  # (B, C) bool
        self.key_segments: Any = None  # (B, C) long
        self.stats = DecodeStats()
        base = model.get_base_model() if hasattr(model, "get_base_model") else model
        self._cache_arg = "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"

    # ------------------------------------------------------------------ rows

    def start(self, prompts: Sequence[list[int]], *, repeats: int = 1, episode_ids: Sequence[str] | None = None) -> Any:
        """Prefill each prompt once, then copy it `repeats` times (rows: prompt-major); returns last logits."""
        torch = self.torch
        self.cache = self._new_cache()
        ids = list(episode_ids) if episode_ids is not None else [f"row-{i}" for i in range(len(prompts))]
        self.rows = [_Row(DualRoleStream(episode_id=ids[i], chunk=0)) for i in range(len(prompts))]
        self.key_valid = torch.zeros((len(prompts), 0), dtype=torch.bool, device=self.device)
        self.key_segments = torch.zeros((len(prompts), 0), dtype=torch.long, device=self.device)
        logits = self.feed(list(prompts))
        if repeats > 1:
            index = torch.arange(len(prompts), device=self.device).repeat_interleave(repeats)
            self.cache.batch_repeat_interleave(repeats)
            self.key_valid = self.key_valid[index]
            self.key_segments = self.key_segments[index]
            logits = logits[index]
            self.rows = [self._copy_row(self.rows[i], f"{self.rows[i].stream.episode_id}#{k}")
                         for i in range(len(prompts)) for k in range(repeats)]
            self.stats.reused_tokens += sum(len(prompt) for prompt in prompts) * (repeats - 1)
        return logits

    def _new_cache(self) -> Any:
        """A DynamicCache; for plain full-attention models one whose layers grow in place (the hf backend's
        growing layers: appending a token does not copy the whole history)."""
        from transformers import DynamicCache

        try:
            probe = DynamicCache(config=self.model.config)
        except TypeError:  # older transformers
            return DynamicCache()
        layers = getattr(probe, "layers", None)
        if layers and all(type(layer).__name__ == "DynamicLayer" for layer in layers):
            try:
                from worldsmith.llm.hf import _growing_layer_class

                cache = DynamicCache()
                cache.layer_class_to_replicate = functools.partial(_growing_layer_class(), reserve=self.reserve)
                return cache
            except (ImportError, AttributeError, TypeError):
                pass
        return probe

    @staticmethod
    def _copy_row(row: _Row, episode_id: str) -> _Row:
        stream = row.stream
        copied = DualRoleStream(episode_id=episode_id, chunk=0, ids=list(stream.ids), positions=list(stream.positions),
                                segments=list(stream.segments), labels=list(stream.labels), roles=list(stream.roles))
        return _Row(copied, row.position, row.segment, row.segment_position, row.segments_used, list(row.logprobs),
                    list(row.pending))

    def keep(self, keep: Sequence[int]) -> None:
        """Keep only these rows (in this order); their indexes become 0..len(keep)-1."""
        torch = self.torch
        if list(keep) == list(range(len(self.rows))):
            return
        index = torch.tensor(list(keep), dtype=torch.long, device=self.device)
        self.cache.batch_select_indices(index)
        self.key_valid = self.key_valid[index]
        self.key_segments = self.key_segments[index]
        self.rows = [self.rows[i] for i in keep]

    def open_segment(self, row: int) -> None:
        """What is fed to `row` next goes into a new rehearse segment (until `close_segment`)."""
        state = self.rows[row]
        self.stats.reused_tokens += len(state.stream.ids)  # the rehearse prompt's history, served from the act cache
        state.segments_used += 1
        state.segment = state.segments_used
        state.segment_position = state.position

    def close_segment(self, row: int) -> None:
        self.rows[row].segment = 0

    # ------------------------------------------------------------------ feeding

    def _items(self, row: int, chunk: Sequence[int], role: int) -> list[tuple[int, int, int]]:
        """Append `chunk` to the row's stream (positions from its cursor): (token, position, segment) each."""
        state = self.rows[row]
        start = state.segment_position if state.segment else state.position
        n = len(chunk)
        stream = state.stream
        stream.ids += chunk
        stream.positions += range(start, start + n)
        stream.segments += [state.segment] * n
        stream.labels += list(chunk) if role != ROLE_NONE else [IGNORE] * n
        stream.roles += [role] * n
        if state.segment:
            state.segment_position += n
        else:
            state.position += n
        return [(token, start + offset, state.segment) for offset, token in enumerate(chunk)]

    def feed(self, chunks: Sequence[Sequence[int] | None], roles: Sequence[int] | None = None) -> Any:
        """Append one chunk per row (None or []: nothing) and return each row's last logits (B, V).

        Tokens a row generated but did not feed yet (a final end-of-turn) go in first. `roles`
        marks the chunk tokens as targets of that role.
        """
        torch = self.torch
        batch = len(self.rows)
        if len(chunks) != batch:
            raise ValueError(f"{len(chunks)} chunks for {batch} rows")
        items: list[list[tuple[int, int, int]]] = []
        for index, chunk in enumerate(chunks):
            state = self.rows[index]
            role = roles[index] if roles is not None else ROLE_NONE
            items.append(state.pending + (self._items(index, chunk, role) if chunk else []))
            state.pending = []
        width = max((len(row) for row in items), default=0)
        if width == 0:
            raise ValueError("nothing to feed")
        input_ids = torch.full((batch, width), self.pad_id, dtype=torch.long)
        positions = torch.zeros((batch, width), dtype=torch.long)
        valid = torch.zeros((batch, width), dtype=torch.bool)
        segments = torch.zeros((batch, width), dtype=torch.long)
        for index, row in enumerate(items):
            segments[index, :] = self.rows[index].segment
            if not row:
                continue
            n = len(row)
            input_ids[index, width - n:] = torch.tensor([item[0] for item in row], dtype=torch.long)
            positions[index, width - n:] = torch.tensor([item[1] for item in row], dtype=torch.long)
            segments[index, width - n:] = torch.tensor([item[2] for item in row], dtype=torch.long)
            valid[index, width - n:] = True
        input_ids, positions = input_ids.to(self.device), positions.to(self.device)
        valid, segments = valid.to(self.device), segments.to(self.device)
        offset = self.key_valid.shape[1]
        self.key_valid = torch.cat([self.key_valid, valid], dim=1)
        self.key_segments = torch.cat([self.key_segments, segments], dim=1)
        allowed = segment_allowed(self.key_segments, self.key_valid, segments, offset)
        mask = additive_mask(allowed, self.mask_dtype)
        output = self.model(input_ids=input_ids, attention_mask=mask, position_ids=positions,
                            use_cache=True, logits_to_keep=1, **{self._cache_arg: self.cache})
        cache = getattr(output, "cache", None)
        cache = cache if cache is not None else getattr(output, "past_key_values", None)
        if cache is not None:
            self.cache = cache
        self.stats.forward_tokens += int(valid.sum())
        self.stats.forward_calls += 1
        return output.logits[:, -1, :].float()

    # ------------------------------------------------------------------ sampling

    def generate(
        self,
        logits: Any,
        rows: Sequence[int],
        *,
        role: int,
        max_new_tokens: int,
        temperature: float = 1.0,
    ) -> dict[int, list[int]]:
        """Sample a completion for each of `rows` from `logits` (B, V), recorded as `role` targets.

        A completion ends with the end-of-turn token; one cut at `max_new_tokens` gets that token
        instead of its last, so every target ends its turn as training text does. The end-of-turn
        token is fed with the row's next chunk (no forward pass for it alone). Temperature 0 is
        greedy. Returns row -> generated ids (end-of-turn included).
        """
        torch = self.torch
        active = list(rows)
        out: dict[int, list[int]] = {row: [] for row in active}
        batch = len(self.rows)
        for step in range(max_new_tokens):
            scaled = logits[active] / temperature if temperature > 0 else logits[active]
            logp = torch.log_softmax(scaled, dim=-1)
            if temperature > 0:
                chosen = torch.multinomial(logp.exp(), 1, generator=self.generator).squeeze(1)
            else:
                chosen = logp.argmax(dim=-1)
            if step == max_new_tokens - 1:
                chosen = torch.full_like(chosen, self.eos_id)  # cut: close the turn
            picked = logp.gather(1, chosen[:, None]).squeeze(1).tolist()
            chunks: list[list[int] | None] = [None] * batch
            still = []
            for position, row in enumerate(active):
                token = int(chosen[position])
                out[row].append(token)
                state = self.rows[row]
                state.logprobs.append(picked[position])
                if token == self.eos_id:
                    state.pending = self._items(row, [token], role)
                else:
                    chunks[row] = [token]
                    still.append(row)
            self.stats.generated_tokens += len(active)
            active = still
            if not active:
                break
            logits = self.feed(chunks, [role] * batch)
        return out
