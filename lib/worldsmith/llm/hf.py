"""Local transformers backend (`hf:PATH`, and `tiny:PATH` for the shipped tiny model).

Loads a causal LM folder with `AutoModelForCausalLM` / `AutoTokenizer` (local files only, never
the hub), applies the tokenizer's chat template and generates in batches with its own decoding
loop, which gives exact control over stop strings, seeded sampling per completion and, above all,
the key/value cache:

Prefix reuse. EnvACE acts and then rehearses on the same history; the worldbook harness asks many
questions about one trajectory. Those prompts share long prefixes, so the backend keeps a small
LRU of past key/value caches keyed by token ids (each prompt's, extended by what was generated
after it) and, for a new prompt, starts from the longest cached prefix and only runs the new
suffix. `Completion.cached_tokens` says how many prompt tokens were served that way. Reuse is
exact up to floating-point reassociation (the tests check greedy outputs match a cold backend).

Batching. Rows of one call run as one batch: cached prefixes and new suffixes are each
left-padded ([pad][prefix][pad][suffix]) and a 4-D additive attention mask hides the padding, with
explicit position ids, so padding never changes a row's positions (an unpadded batch uses the
model's own causal mask). Finished rows leave the batch.

Semantics. Stop strings end a completion and are cut from its text (finish_reason "stop", as is
the end-of-turn token); max_tokens gives "length", and so does reaching the context window
(a prompt that does not fit raises ContextOverflowError). A seed makes sampling reproducible per
completion, whatever else is in the batch. `json_schema` is not enforced (no guided decoding
here): the structured-output layer validates and repairs.

Options (`hf:PATH?device=cpu&dtype=float32&max_batch=8`): device (cpu, cuda, cuda:1; default cuda
when available), dtype (float32, bfloat16, float16, auto; default float32 on CPU, bfloat16 on
GPU), max_batch (rows per forward pass, default 16), prefix_cache (entries kept, 0 disables,
default 8), prefix_cache_mb (memory bound of those entries, default 1024), attn (attention
implementation: sdpa, the default, or eager; padded batches need one that takes a 4-D mask),
threads (torch CPU threads; default: torch's, i.e. OMP_NUM_THREADS). Prefix reuse needs plain
full-attention caches; models with sliding-window or linear-attention layers run without it.

Prompt lookup (`worldsmith.llm.prompt_lookup`): prompt_lookup (true/false, default true),
lookup_draft (tokens drafted per pass, default 8), lookup_ngram (longest n-gram matched, default 3).
Each decode pass runs the last token plus a draft copied from the context (prompt and answer so
far) and keeps what the model agrees with, so answers that copy the context take fewer passes;
greedy text is unchanged and sampled text keeps its distribution (the tests check both). Rows of a
batch draft and accept on their own: rejected columns become padding, and columns no row kept are
cropped. Needs plain caches too (else plain decoding).
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from worldsmith.llm.base import (
    BackendUnavailableError,
    Completion,
    ContextOverflowError,
    GenerationParams,
    LLMBase,
    LLMError,
    Message,
)
from worldsmith.llm.decoding import (
    causal_mask,
    forward_arguments,
    mask_dtype,
    new_cache,
    pack_rows,
    plain_cache,
    run_forward,
)
from worldsmith.llm.prompt_lookup import LookupStats, NgramIndex, PromptLookup, accept_rows, target_probs
from worldsmith.llm.spec import ModelSpec
from worldsmith.util.errors import BadInputError

__all__ = ["HFLLM", "PrefixCacheStats", "from_spec"]

_MIN_REUSE = 4  # shortest cached prefix worth reusing (tokens)
_OPTIONS = ("device", "dtype", "max_batch", "prefix_cache", "prefix_cache_mb", "attn", "threads")
_LOOKUP_OPTIONS = ("prompt_lookup", "lookup_draft", "lookup_ngram")


@dataclass
class PrefixCacheStats:
    """How the prefix cache has served this backend (for tests, benchmarks and the workbench)."""

    entries: int = 0
    tokens: int = 0
    bytes: int = 0
    lookups: int = 0
    hits: int = 0
    reused_tokens: int = 0


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    limit = min(len(a), len(b))
    index = 0
    while index < limit and a[index] == b[index]:
        index += 1
    return index


class _PrefixCache:
    """LRU of per-sequence key/value tensors keyed by the token ids they encode.

    An entry is one tensor pair per layer, shaped (1, kv_heads, tokens, head_dim). Storing a key
    drops entries that are prefixes of it: the longer entry serves every prompt they could.
    """

    def __init__(self, max_entries: int, max_bytes: int) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.items: OrderedDict[tuple[int, ...], list[tuple[Any, Any]]] = OrderedDict()
        self.sizes: dict[tuple[int, ...], int] = {}
        self.stats = PrefixCacheStats()

    @property
    def enabled(self) -> bool:
        return self.max_entries > 0 and self.max_bytes > 0

    def lookup(self, ids: Sequence[int]) -> tuple[int, list[tuple[Any, Any]] | None]:
        """The longest cached prefix of `ids`, leaving at least its last token to run: (length, tensors) or (0, None)."""
        self.stats.lookups += 1
        best_key, best = None, 0
        for key in self.items:
            length = min(_common_prefix(key, ids), len(ids) - 1)
            if length > best:
                best_key, best = key, length
        if best_key is None or best < _MIN_REUSE:  # a shared <|im_start|> is not worth a padded batch layout
            return 0, None
        self.items.move_to_end(best_key)
        self.stats.hits += 1
        return best, self.items[best_key]

    def store(self, ids: Sequence[int], layers: list[tuple[Any, Any]]) -> None:
        if not self.enabled or not ids:
            return
        key = tuple(ids)
        size = sum(k.untyped_storage().nbytes() + v.untyped_storage().nbytes() for k, v in layers)  # views: their buffer
        if size > self.max_bytes:
            return
        for other in [other for other in self.items if len(other) <= len(key) and key[: len(other)] == other]:
            self._drop(other)
        self.items[key] = layers
        self.sizes[key] = size
        while len(self.items) > self.max_entries or sum(self.sizes.values()) > self.max_bytes:
            self._drop(next(iter(self.items)))

    def _drop(self, key: tuple[int, ...]) -> None:
        self.items.pop(key, None)
        self.sizes.pop(key, None)

    def clear(self) -> None:
        self.items.clear()
        self.sizes.clear()

    def snapshot(self) -> PrefixCacheStats:
        stats = PrefixCacheStats(**vars(self.stats))
        stats.entries = len(self.items)
        stats.tokens = sum(len(key) for key in self.items)
        stats.bytes = sum(self.sizes.values())
        return stats


def _completion_seed(seed: int, index: int, prompt: Sequence[int]) -> int:
    """A 63-bit generator seed per (call seed, completion index, prompt).

    Seeding each completion on its own makes a seeded result independent of batching: the same
    conversation and seed give the same text alone or inside chat_many, while different
    conversations (or the n completions of one) draw independent streams.
    """
    hasher = hashlib.blake2b(f"{seed}:{index}:".encode(), digest_size=8)
    hasher.update(",".join(map(str, prompt)).encode())
    return int.from_bytes(hasher.digest(), "big") & ((1 << 63) - 1)


@dataclass
class _Chunk:
    """One chunk of a `generate` call being decoded.

    A row is one completion (n per conversation, conversation-major); the batch holds the `active` rows, in
    that order: `cache`, `valid` (which of its columns are real tokens) and `logits` (the last pass's columns).
    """

    prompts: list[list[int]]
    params: GenerationParams
    started: float
    reuse: bool  # the prefix cache serves and stores these prompts
    matches: list[int] = field(default_factory=list)  # per conversation: prompt tokens served from the prefix cache
    cache: Any = None
    valid: Any = None  # (batch, columns) bool
    logits: Any = None  # (batch, columns, V)
    base: int = 0  # first column of the last pass's block (0: the logits came from the prefill)
    conversations: list[int] = field(default_factory=list)  # per row
    limits: list[int] = field(default_factory=list)  # per row: tokens it may generate
    generators: list[Any] = field(default_factory=list)  # per row, for seeded sampling (else none)
    generated: list[list[int]] = field(default_factory=list)  # per row
    drafts: list[list[int]] = field(default_factory=list)  # per row: prompt lookup's draft fed in the last pass
    results: dict[int, Completion] = field(default_factory=dict)  # row -> its completion, once finished
    active: list[int] = field(default_factory=list)  # batch position -> row

    def retire(self, finished: Sequence[int]) -> bool:
        """Drop the `finished` batch positions from the batch; False when no row is left."""
        import torch

        done = set(finished)
        keep = [position for position in range(len(self.active)) if position not in done]
        if not keep:
            return False
        select = torch.tensor(keep, device=self.valid.device)
        self.cache.batch_select_indices(select)
        self.valid = self.valid[select]
        self.active = [self.active[position] for position in keep]
        return True

    def crop(self) -> None:
        """After a verify pass: crop the columns no row kept, so the cache grows by what was accepted."""
        last = int(self.valid.any(dim=0).nonzero().max()) + 1
        if last < self.valid.shape[1]:
            self.cache.crop(last - self.valid.shape[1])
            self.valid = self.valid[:, :last]


@contextlib.contextmanager
def _quiet_loading() -> Iterator[None]:
    """No weight-loading progress bars on stderr (the workbench and CLI have their own output)."""
    from transformers.utils import logging as hf_logging

    enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if enabled:
            hf_logging.enable_progress_bar()


class HFLLM(LLMBase):
    """A local transformers causal LM behind the `LLM` protocol, with key/value prefix reuse."""

    def __init__(
        self,
        path: str | Path,
        *,
        backend: str = "hf",
        spec: str | None = None,
        device: str | None = None,
        dtype: str | None = None,
        max_batch: int = 16,
        prefix_cache: int = 8,
        prefix_cache_mb: float = 1024,
        attn: str = "sdpa",
        threads: int | None = None,
        prompt_lookup: bool = True,
        lookup_draft: int = 8,
        lookup_ngram: int = 3,
    ) -> None:
        folder = Path(path).expanduser()
        if not folder.exists():
            raise BackendUnavailableError(f"no model folder at {folder}")
        if not folder.is_dir() or not (folder / "config.json").is_file():
            raise BackendUnavailableError(f"{folder} is not a Hugging Face model folder (no config.json in it)")
        try:
            import torch
            import transformers
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError as error:
            raise BackendUnavailableError(f"the hf backend needs torch and transformers: {error}") from None
        if max_batch < 1:
            raise BadInputError(f"max_batch must be at least 1, not {max_batch}")
        self.lookup = PromptLookup.from_options(
            {"prompt_lookup": prompt_lookup, "lookup_draft": lookup_draft, "lookup_ngram": lookup_ngram})
        self.lookup_stats = LookupStats()  # decode passes per row and what they emitted (with lookup off too)
        if threads is not None:
            torch.set_num_threads(int(threads))

        self._torch = torch
        self.backend = backend
        self.model = str(path)
        self.spec = spec or f"{backend}:{path}"
        self.path = folder
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        torch_dtype = self._dtype(dtype)
        try:
            with _quiet_loading():
                self.tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
                dtype_arg = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
                self.net: Any = AutoModelForCausalLM.from_pretrained(  # any causal LM; None once closed
                    folder, local_files_only=True, attn_implementation=attn, **{dtype_arg: torch_dtype}
                )
        except (OSError, ValueError, KeyError, ImportError) as error:
            raise BackendUnavailableError(f"cannot load a causal LM from {folder}: {error}") from None
        self.net.to(self.device)  # type: ignore[arg-type]  # transformers types `to` as a wrapped unbound method
        self.net.eval()
        self.max_batch = int(max_batch)
        text_config = self.net.config.get_text_config() if hasattr(self.net.config, "get_text_config") else self.net.config
        window = getattr(text_config, "max_position_embeddings", None) or getattr(self.tokenizer, "model_max_length", 0)
        self.context_window = int(window) if window and window < 10_000_000 else 2048
        self.pad_id = self._pad_id()
        self.eos_ids = self._eos_ids()
        self._forward_arguments = forward_arguments(self.net)
        self._prefix = _PrefixCache(int(prefix_cache), int(float(prefix_cache_mb) * 2**20))
        self._reusable: bool | None = None  # plain full-attention caches only (see _plain_cache)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ setup helpers

    def _dtype(self, name: str | None) -> Any:
        torch = self._torch
        if name is None:
            name = "float32" if self.device.type == "cpu" else "bfloat16"
        if name == "auto":
            return "auto"
        value = getattr(torch, str(name), None)
        if not isinstance(value, torch.dtype) or not value.is_floating_point:
            raise BadInputError(f"dtype must be float32, bfloat16, float16 or auto, not {name!r}")
        return value

    def _pad_id(self) -> int:
        for value in (self.tokenizer.pad_token_id, getattr(self.net.generation_config, "pad_token_id", None)):
            if isinstance(value, int):
                return value
        eos = self.tokenizer.eos_token_id
        return eos if isinstance(eos, int) else 0

    def _eos_ids(self) -> set[int]:
        ids: set[int] = set()
        for value in (getattr(self.net.generation_config, "eos_token_id", None), self.tokenizer.eos_token_id):
            if isinstance(value, int):
                ids.add(value)
            elif isinstance(value, list | tuple):
                ids.update(v for v in value if isinstance(v, int))
        return ids

    # ------------------------------------------------------------------ public helpers

    def encode(self, messages: Sequence[Message]) -> list[int]:
        """Prompt token ids of a conversation: the chat template with the assistant's turn opened."""
        if getattr(self.tokenizer, "chat_template", None):
            chat = cast("list[dict[str, str]]", list(messages))  # a Message is a dict of strings
            text = self.tokenizer.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        else:  # a base model without a template: plain ChatML text
            from worldsmith.llm.tiny import render_chat

            text = render_chat(messages, add_generation_prompt=True)
        return list(self.tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"])

    @property
    def prefix_cache_stats(self) -> PrefixCacheStats:
        return self._prefix.snapshot()

    def clear_prefix_cache(self) -> None:
        with self._lock:
            self._prefix.clear()

    def close(self) -> None:
        with self._lock:
            self._prefix.clear()
            self.net = None
            if self.device.type == "cuda":
                self._torch.cuda.empty_cache()

    # ------------------------------------------------------------------ generation

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        started = time.perf_counter()
        out: list[list[Completion]] = []
        with self._lock, self._torch.inference_mode():
            if self.net is None:
                raise BackendUnavailableError(f"{self.spec}: the backend was closed")
            prompts = [self.encode(messages) for messages in conversations]
            for position, ids in enumerate(prompts):
                if len(ids) >= self.context_window:
                    raise ContextOverflowError(
                        f"{self.spec}: conversation {position} is {len(ids)} prompt tokens; "
                        f"the model's context window is {self.context_window}"
                    )
                if not ids:
                    raise LLMError(f"{self.spec}: conversation {position} renders to an empty prompt")
            per_chunk = max(1, self.max_batch // params.n)
            for start in range(0, len(prompts), per_chunk):
                out.extend(self._generate_chunk(prompts[start : start + per_chunk], params, started))
        return out

    # ------------------------------------------------------------------ one chunk: prefill, fan-out, decode

    def _generate_chunk(self, prompts: list[list[int]], params: GenerationParams, started: float) -> list[list[Completion]]:
        chunk = self._prefill(prompts, params, started)
        self._fan_out(chunk)
        self._decode(chunk)
        n = params.n
        return [[chunk.results[row] for row in range(c * n, (c + 1) * n)] for c in range(len(prompts))]

    def _prefill(self, prompts: list[list[int]], params: GenerationParams, started: float) -> _Chunk:
        """Run the prompts, [pad][cached prefix][pad][new suffix] per row, and store them in the prefix cache."""
        torch = self._torch
        chunk = _Chunk(prompts, params, started, reuse=self._plain_cache() and self._prefix.enabled)
        found = [self._prefix.lookup(ids) if chunk.reuse else (0, None) for ids in prompts]
        chunk.matches = [length for length, _ in found]
        width_prefix = max(chunk.matches)
        input_ids, positions, suffix_valid = pack_rows(
            [ids[m:] for ids, m in zip(prompts, chunk.matches, strict=True)],
            [range(m, len(ids)) for ids, m in zip(prompts, chunk.matches, strict=True)],
            pad_id=self.pad_id,
        )
        starts = torch.tensor([width_prefix - m for m in chunk.matches])
        prefix_valid = torch.arange(width_prefix)[None, :] >= starts[:, None]
        valid = torch.cat([prefix_valid, suffix_valid], dim=1).to(self.device)
        cache = self._new_cache(reserve=max(self._limit(ids, params) for ids in prompts))
        if width_prefix:
            self._seed_cache(cache, [layers for _, layers in found], chunk.matches)
            self._prefix.stats.reused_tokens += sum(chunk.matches)
        chunk.logits, chunk.cache = self._forward(input_ids.to(self.device), valid, positions.to(self.device), cache)
        chunk.valid = valid
        if chunk.reuse:
            for row, ids in enumerate(prompts):
                self._prefix.store(ids, self._row_layers(chunk.cache, row, valid[row]))
        return chunk

    def _limit(self, ids: Sequence[int], params: GenerationParams) -> int:
        """Tokens a completion of prompt `ids` may have: max_tokens, or what is left of the context window."""
        return min(params.max_tokens, self.context_window - len(ids))

    @staticmethod
    def _seed_cache(cache: Any, prefixes: Sequence[list[tuple[Any, Any]] | None], matches: Sequence[int]) -> None:
        """Put each row's cached prefix into the empty batch cache, right-aligned in the prefix columns."""
        width = max(matches)
        first = next(layers for layers in prefixes if layers is not None)
        for index, (keys_of_first, values_of_first) in enumerate(first):
            if len(prefixes) == 1:  # no padding to add: the cached tensors themselves (update copies them)
                cache.update(keys_of_first[:, :, :width], values_of_first[:, :, :width], index)
                continue
            keys = keys_of_first.new_zeros((len(prefixes), keys_of_first.shape[1], width, keys_of_first.shape[3]))
            values = values_of_first.new_zeros((len(prefixes), keys_of_first.shape[1], width, values_of_first.shape[3]))
            for row, layers in enumerate(prefixes):
                if layers is not None:
                    m = matches[row]
                    keys[row, :, width - m :] = layers[index][0][0, :, :m]
                    values[row, :, width - m :] = layers[index][1][0, :, :m]
            cache.update(keys, values, index)

    def _fan_out(self, chunk: _Chunk) -> None:
        """One row per completion (n per conversation), each with its length limit and, seeded, its generator."""
        torch, params, n = self._torch, chunk.params, chunk.params.n
        chunk.conversations = [conversation for conversation in range(len(chunk.prompts)) for _ in range(n)]
        if n > 1:
            select = torch.tensor(chunk.conversations, device=self.device)
            chunk.cache.batch_select_indices(select)
            chunk.valid, chunk.logits = chunk.valid[select], chunk.logits[select]
        if not params.greedy and params.seed is not None:
            for row, conversation in enumerate(chunk.conversations):
                generator = torch.Generator(device=self.device)
                generator.manual_seed(_completion_seed(params.seed, row - conversation * n, chunk.prompts[conversation]))
                chunk.generators.append(generator)
        chunk.limits = [self._limit(chunk.prompts[c], params) for c in chunk.conversations]
        chunk.generated = [[] for _ in chunk.conversations]
        chunk.drafts = [[] for _ in chunk.conversations]
        chunk.active = list(range(len(chunk.conversations)))

    def _decode(self, chunk: _Chunk) -> None:
        """Each pass feeds every active row's last token and its draft (none without lookup), left-aligned, and
        takes what the model agrees with; finished rows leave the batch."""
        lookup = self.lookup if self.lookup.enabled and self._plain_cache() else None
        indexes = [NgramIndex(lookup.ngram) for _ in chunk.conversations] if lookup is not None else []
        while True:
            finished = self._accept(chunk)
            if chunk.reuse and chunk.params.n == 1:
                self._store_answers(chunk, finished)
            if finished and not chunk.retire(finished):
                return
            if chunk.base:
                chunk.crop()
            for row in chunk.active:
                context = chunk.prompts[chunk.conversations[row]] + chunk.generated[row]
                room = min(lookup.draft, chunk.limits[row] - len(chunk.generated[row]) - 1) if lookup is not None else 0
                chunk.drafts[row] = indexes[row].draft(context, room, self.eos_ids) if room > 0 else []
            self._verify(chunk)

    def _accept(self, chunk: _Chunk) -> list[int]:
        """Take each active row's tokens from the last pass until it finishes; its batch positions that did.

        After a verify pass, the block's columns a row did not take become padding."""
        params = chunk.params
        scores = chunk.logits if params.greedy else target_probs(chunk.logits, params.temperature, params.top_p)
        emitted = accept_rows([chunk.drafts[row] for row in chunk.active], scores, sample=not params.greedy,
                              generators=[chunk.generators[row] for row in chunk.active] if chunk.generators else None)
        finished: list[int] = []
        for position, row in enumerate(chunk.active):
            count, done = len(emitted[position]), None
            for taken, token in enumerate(emitted[position], 1):
                chunk.generated[row].append(token)
                done = self._finish(chunk, row, token)
                if done is not None:
                    count = taken
                    break
            if chunk.base:  # kept: the last token fed and the draft tokens taken
                self.lookup_stats.record(len(chunk.drafts[row]), len(emitted[position]) - 1, count)
                chunk.valid[position, chunk.base + count :] = False
            if done is not None:
                chunk.results[row] = done
                finished.append(position)
        return finished

    def _store_answers(self, chunk: _Chunk, finished: Sequence[int]) -> None:
        """Keep prompt + answer of finished rows: the next turn of their conversation extends it."""
        for position in finished:
            row = chunk.active[position]
            ids = chunk.prompts[chunk.conversations[row]] + chunk.generated[row][:-1]
            if int(chunk.valid[position].sum()) == len(ids):
                self._prefix.store(ids, self._row_layers(chunk.cache, position, chunk.valid[position]))

    def _verify(self, chunk: _Chunk) -> None:
        """One forward pass over each active row's last token and its draft (left-aligned), after the cache."""
        fed = [[chunk.generated[row][-1], *chunk.drafts[row]] for row in chunk.active]
        starts = [len(chunk.prompts[chunk.conversations[row]]) + len(chunk.generated[row]) - 1 for row in chunk.active]
        input_ids, positions, block = pack_rows(
            fed, [range(start, start + len(tokens)) for start, tokens in zip(starts, fed, strict=True)],
            pad_id=self.pad_id, left=True,
        )
        chunk.base = chunk.valid.shape[1]
        valid = self._torch.cat([chunk.valid, block.to(self.device)], dim=1)
        chunk.logits, chunk.cache = self._forward(input_ids.to(self.device), valid, positions.to(self.device),
                                                  chunk.cache, keep=block.shape[1])
        chunk.valid = valid

    def _forward(self, input_ids: Any, valid: Any, positions: Any, cache: Any, keep: int = 1) -> tuple[Any, Any]:
        """Logits (batch, keep, V) of the last `keep` input columns (a verify pass needs them all), and the cache;
        `valid` (batch, columns) marks the real columns of the cache and this block."""
        mask = causal_mask(valid, input_ids.shape[1], mask_dtype(self.net.dtype))
        return run_forward(self.net, self._forward_arguments, input_ids, mask, positions, cache, keep)

    def _plain_cache(self) -> bool:
        """Whether this model's cache is plain full attention (`decoding.plain_cache`): prefix reuse and prompt
        lookup need it."""
        if self._reusable is None:
            self._reusable = plain_cache(self.net.config)
        return self._reusable

    def _new_cache(self, reserve: int) -> Any:
        return new_cache(self.net.config, plain=self._plain_cache(), reserve=reserve)

    def _row_layers(self, cache: Any, row: int, valid: Any) -> list[tuple[Any, Any]]:
        """One row's keys/values at its real-token columns (`valid`), out of the batch cache.

        A lone unpadded row is kept by reference: the growing layers only write past the end of what
        they handed out, so what the cache held never changes. Otherwise the row is copied out (a view
        would keep the whole batch alive).
        """
        layers = cache.layers
        if layers[0].keys.shape[0] == 1 and bool(valid.all()):
            return [(layer.keys, layer.values) for layer in layers]
        columns = valid.nonzero().squeeze(1)
        return [
            (layer.keys[row : row + 1, :, columns].contiguous(), layer.values[row : row + 1, :, columns].contiguous())
            for layer in layers
        ]

    def _finish(self, chunk: _Chunk, row: int, token: int) -> Completion | None:
        """The completion if this row is done (end of turn, a stop string, the length limit), else None."""
        params, tokens = chunk.params, chunk.generated[row]
        ended = token in self.eos_ids
        text: str | None = None
        reason = "stop"
        if params.stop and not ended:
            text, ended = _cut_at_stop(self._decode_text(tokens), params.stop)
        if not ended and len(tokens) >= chunk.limits[row]:
            ended, reason = True, "length"
        if not ended:
            return None
        if text is None:
            text, _ = _cut_at_stop(self._decode_text(tokens[:-1] if token in self.eos_ids else tokens), params.stop)
        # with n > 1 the prompt is counted once, on the first choice (the Completion convention)
        conversation = chunk.conversations[row]
        first = row == conversation * params.n
        prompt = len(chunk.prompts[conversation]) if first else 0
        cached = chunk.matches[conversation] if first else 0
        return Completion(
            text=text,
            finish_reason=reason,
            prompt_tokens=prompt,
            completion_tokens=len(tokens),
            cached_tokens=cached,
            latency_s=round(time.perf_counter() - chunk.started, 6),
            cost_usd=0.0,
            model=self.model,
            backend=self.backend,
            extra={"prefill_tokens": prompt - cached}
            | ({"json_schema": "not enforced (no guided decoding in the hf backend)"} if params.json_schema else {}),
        )

    def _decode_text(self, tokens: Sequence[int]) -> str:
        return str(self.tokenizer.decode(list(tokens), skip_special_tokens=True))


def _cut_at_stop(text: str, stops: Sequence[str]) -> tuple[str, bool]:
    """`text` up to the earliest stop string in it, and whether there was one."""
    cut = min((i for i in (text.find(s) for s in stops if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


def from_spec(spec: ModelSpec) -> HFLLM:
    """The factory `worldsmith.llm.spec.make_llm` calls for `tiny:` and `hf:` specs."""
    options = {key: value for key, value in spec.options.items() if key in _OPTIONS + _LOOKUP_OPTIONS}
    return HFLLM(spec.model, backend=spec.kind, spec=spec.text, **options)
