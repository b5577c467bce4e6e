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

Prompt lookup (`generate(..., lookup=PromptLookup())`, `worldsmith.llm.prompt_lookup`): each pass
feeds a row's last token plus a draft copied from its own stream (left-aligned), and the row keeps
the draft tokens the model agrees with (greedy: the same tokens as without; sampled: the same
distribution, and the recorded log-probs are the target's). Rejected draft columns become invalid
keys like padding, and columns no row kept are cropped from the cache. Rollouts use it for the
rehearse step, whose answers mostly copy the context.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from worldsmith.envace.data import IGNORE, ROLE_NONE, DualRoleStream
from worldsmith.envace.modeling import segment_allowed
from worldsmith.llm.decoding import (
    additive_mask,
    forward_arguments,
    mask_dtype,
    new_cache,
    pack_rows,
    plain_cache,
    run_forward,
)
from worldsmith.llm.prompt_lookup import LookupStats, NgramIndex, PromptLookup, accept_rows

__all__ = ["DecodeStats", "SegmentDecoder"]


@dataclass
class DecodeStats:
    """What the decoder computed: tokens run through the model, generated, and served from the cache."""

    forward_tokens: int = 0
    generated_tokens: int = 0
    reused_tokens: int = 0  # history a rehearse step (or a copied prompt) took from the cache instead of recomputing
    forward_calls: int = 0
    lookup: LookupStats = field(default_factory=LookupStats)  # the decode passes of generate (lookup on or off)

    def add(self, other: DecodeStats) -> None:
        for name in ("forward_tokens", "generated_tokens", "reused_tokens", "forward_calls"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.lookup.add(other.lookup)


@dataclass
class _Row:
    stream: DualRoleStream
    position: int = 0  # next position in the agent's view
    segment: int = 0  # the open segment (0: the agent's view)
    segment_position: int = 0
    segments_used: int = 0
    logprobs: list[float] = field(default_factory=list)  # sampling log-probs of generated target tokens
    pending: list[tuple[int, int, int]] = field(default_factory=list)  # generated, not yet fed to the model
    index: NgramIndex | None = None  # prompt lookup's n-grams of `stream.ids` (built on first use)


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
        self.mask_dtype = mask_dtype(next(model.parameters()).dtype)
        self.rows: list[_Row] = []
        self.cache: Any = None
        self.key_valid: Any = None  # (B, C) bool
        self.key_segments: Any = None  # (B, C) long
        self.stats = DecodeStats()
        # plain full-attention caches: prompt lookup crops rejected columns (else it is off)
        self.croppable = plain_cache(model.config)
        self._forward_arguments = forward_arguments(model)

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
        """A DynamicCache; for plain full-attention models (then `croppable`) one whose layers grow in place
        (appending a token does not copy the whole history)."""
        return new_cache(self.model.config, plain=self.croppable, reserve=self.reserve)

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
        batch = len(self.rows)
        if len(chunks) != batch:
            raise ValueError(f"{len(chunks)} chunks for {batch} rows")
        items: list[list[tuple[int, int, int]]] = []
        for index, chunk in enumerate(chunks):
            state = self.rows[index]
            role = roles[index] if roles is not None else ROLE_NONE
            items.append(state.pending + (self._items(index, chunk, role) if chunk else []))
            state.pending = []
        return self._run(items, keep=1)[:, -1, :]

    def _run(self, items: list[list[tuple[int, int, int]]], *, keep: int, left: bool = False) -> Any:
        """One forward pass over one list of (token, position, segment) per row; logits (B, keep, V) of the last
        `keep` columns. Rows are right-aligned (each row's last token in the last column), or left-aligned for a
        verify pass (rejected draft columns then sit at the right end, where they can be cropped)."""
        torch = self.torch
        width = max((len(row) for row in items), default=0)
        if width == 0:
            raise ValueError("nothing to feed")
        input_ids, positions, valid = pack_rows([[item[0] for item in row] for row in items],
                                                [[item[1] for item in row] for row in items],
                                                pad_id=self.pad_id, width=width, left=left)
        segments = torch.tensor([state.segment for state in self.rows], dtype=torch.long)[:, None].repeat(1, width)
        segments[valid] = torch.tensor([item[2] for row in items for item in row], dtype=torch.long)  # row-major
        input_ids, positions = input_ids.to(self.device), positions.to(self.device)
        valid, segments = valid.to(self.device), segments.to(self.device)
        offset = self.key_valid.shape[1]
        self.key_valid = torch.cat([self.key_valid, valid], dim=1)
        self.key_segments = torch.cat([self.key_segments, segments], dim=1)
        mask = additive_mask(segment_allowed(self.key_segments, self.key_valid, segments, offset), self.mask_dtype)
        logits, self.cache = run_forward(self.model, self._forward_arguments, input_ids, mask, positions, self.cache,
                                         keep)
        self.stats.forward_tokens += int(valid.sum())
        self.stats.forward_calls += 1
        return logits

    # ------------------------------------------------------------------ sampling

    def generate(
        self,
        logits: Any,
        rows: Sequence[int],
        *,
        role: int,
        max_new_tokens: int,
        temperature: float = 1.0,
        lookup: PromptLookup | None = None,
    ) -> dict[int, list[int]]:
        """Sample a completion for each of `rows` from `logits` (B, V), recorded as `role` targets.

        A completion ends with the end-of-turn token; one cut at `max_new_tokens` gets that token
        instead of its last, so every target ends its turn as training text does. The end-of-turn
        token is fed with the row's next chunk (no forward pass for it alone). Temperature 0 is
        greedy. With `lookup` on, each pass also verifies a draft per row copied from its stream
        (on models whose cache can be cropped; else plain decoding). Returns row -> generated ids
        (end-of-turn included).
        """
        torch = self.torch
        settings = lookup if lookup is not None and lookup.enabled and self.croppable else None
        active = list(rows)
        out: dict[int, list[int]] = {row: [] for row in active}
        drafts: dict[int, list[int]] = {row: [] for row in active}
        scores = logits[active][:, None, :]  # (active, columns, V): after each row's last token, then its draft
        kept: list[int] | None = None  # per row: columns of the last pass it keeps (None: `logits` came from a feed)
        offset = 0  # the first cache column of the last pass
        while True:
            logp = torch.log_softmax(scores / temperature if temperature > 0 else scores, dim=-1)
            emitted = accept_rows([drafts[row] for row in active], logp.exp() if temperature > 0 else logp,
                                  sample=temperature > 0, generators=self.generator)
            for position, row in enumerate(active):
                tokens = emitted[position] = emitted[position][: max_new_tokens - len(out[row])]
                if len(out[row]) + len(tokens) == max_new_tokens:
                    tokens[-1] = self.eos_id  # cut: close the turn
            where = [(position, column) for position, tokens in enumerate(emitted) for column in range(len(tokens))]
            picked = logp[[p for p, _ in where], [c for _, c in where], [t for tokens in emitted for t in tokens]].tolist()
            still = []
            for position, row in enumerate(active):
                tokens = emitted[position]
                state = self.rows[row]
                out[row] += tokens
                state.logprobs += picked[: len(tokens)]
                del picked[: len(tokens)]
                if len(tokens) > 1:
                    self._items(row, tokens[:-1], role)  # the draft tokens taken: already in the cache
                self.stats.generated_tokens += len(tokens)
                if kept is not None:
                    kept[row] += len(tokens)  # its last token and the draft tokens taken
                    self.stats.lookup.record(len(drafts[row]), len(tokens) - 1, len(tokens))
                if tokens[-1] == self.eos_id:
                    state.pending = self._items(row, tokens[-1:], role)
                else:
                    still.append(row)
            if kept is not None and any(drafts[row] for row in active):
                self._drop_rejected(offset, kept)
            active = still
            if not active:
                break
            items: list[list[tuple[int, int, int]]] = []
            kept = []
            live = set(active)
            for row, state in enumerate(self.rows):  # end-of-turn tokens of rows just finished go in too
                chunk, state.pending = state.pending, []
                kept.append(len(chunk))
                if row in live:
                    chunk += self._items(row, out[row][-1:], role)
                    drafts[row] = self._draft(row, settings, max_new_tokens - len(out[row]) - 1)
                    first = chunk[-1][1] + 1
                    chunk += [(token, first + i, state.segment) for i, token in enumerate(drafts[row])]
                items.append(chunk)
            offset = self.key_valid.shape[1]
            logits = self._run(items, keep=max(len(chunk) for chunk in items), left=True)
            width = 1 + max(len(drafts[row]) for row in active)
            if not any(kept[row] for row in active):  # no row's pass starts after other tokens: one gather
                scores = logits[torch.tensor(active, device=logits.device), :width]
                continue
            scores = logits.new_zeros((len(active), width, logits.shape[-1]))
            for position, row in enumerate(active):
                n = 1 + len(drafts[row])
                scores[position, :n] = logits[row, kept[row] : kept[row] + n]
        return out

    def _draft(self, row: int, settings: PromptLookup | None, room: int) -> list[int]:
        """Prompt lookup's draft for `row` (its whole stream is the context to copy from), at most `room` tokens."""
        if settings is None or room < 1:
            return []
        state = self.rows[row]
        if state.index is None or state.index.ngram != settings.ngram:
            state.index = NgramIndex(settings.ngram)
        return state.index.draft(state.stream.ids, min(settings.draft, room), (self.eos_id,))

    def _drop_rejected(self, offset: int, kept: Sequence[int]) -> None:
        """After a verify pass from cache column `offset`: each row's columns past its `kept` ones become invalid
        keys (padding), and the columns no row kept are cropped from the cache."""
        torch = self.torch
        columns = self.key_valid.shape[1]
        block = torch.arange(columns - offset, device=self.device)
        limit = torch.tensor(list(kept), device=self.device)
        self.key_valid[:, offset:] &= block[None, :] < limit[:, None]
        last = offset + max(kept)
        if last < columns:
            self.cache.crop(last - columns)
            self.key_valid = self.key_valid[:, :last]
            self.key_segments = self.key_segments[:, :last]
