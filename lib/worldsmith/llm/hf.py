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
import functools
import hashlib
import inspect
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worldsmith.llm.base import (
    BackendUnavailableError,
    Completion,
    ContextOverflowError,
    GenerationParams,
    LLMBase,
    LLMError,
    Message,
)
from worldsmith.llm.prompt_lookup import LookupStats, NgramIndex, PromptLookup, accept_rows, target_probs
from worldsmith.llm.spec import ModelSpec

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


def _growing_layer_class() -> type:
    """A DynamicLayer that appends into spare room of a buffer instead of concatenating.

    transformers' DynamicLayer copies the whole cache (torch.cat) for every generated token; at a
    thousand tokens of history that is a third of a decode step of a small model. This layer
    keeps `keys`/`values` as views of the first `n` positions of a buffer with `reserve` spare
    positions and writes new tokens in place; whatever replaces `keys` with a tensor of its own
    (batch selection, crop, reset) simply makes the next update allocate a new buffer. Views
    handed out earlier (stored prefixes) never change: writes only go past their end. A crop (prompt
    lookup dropping rejected draft columns) keeps the view, so the next update overwrites the cropped
    columns in place; decoders never crop below a stored prefix (they only crop drafted columns).
    """
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def __init__(self, reserve: int = 64, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.reserve = max(1, int(reserve))
            self._buffers: tuple[Any, Any] | None = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            length = self.get_seq_length()
            total = length + key_states.shape[-2]
            buffers = self._buffers
            if (
                buffers is None
                or buffers[0].shape[-2] < total
                or buffers[0].shape[0] != key_states.shape[0]
                or (length and self.keys.data_ptr() != buffers[0].data_ptr())
            ):
                import torch

                shape_k = (*key_states.shape[:2], total + self.reserve, key_states.shape[-1])
                shape_v = (*value_states.shape[:2], total + self.reserve, value_states.shape[-1])
                buffers = (
                    torch.empty(shape_k, dtype=key_states.dtype, device=key_states.device),
                    torch.empty(shape_v, dtype=value_states.dtype, device=value_states.device),
                )
                if length:
                    buffers[0][:, :, :length] = self.keys
                    buffers[1][:, :, :length] = self.values
                self._buffers = buffers
            buffers[0][:, :, length:total] = key_states
            buffers[1][:, :, length:total] = value_states
            self.keys, self.values = buffers[0][:, :, :total], buffers[1][:, :, :total]
            return self.keys, self.values

    return GrowingLayer


def _completion_seed(seed: int, index: int, prompt: Sequence[int]) -> int:
    """A 63-bit generator seed per (call seed, completion index, prompt).

    Seeding each completion on its own makes a seeded result independent of batching: the same
    conversation and seed give the same text alone or inside chat_many, while different
    conversations (or the n completions of one) draw independent streams.
    """
    hasher = hashlib.blake2b(f"{seed}:{index}:".encode(), digest_size=8)
    hasher.update(",".join(map(str, prompt)).encode())
    return int.from_bytes(hasher.digest(), "big") & ((1 << 63) - 1)


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
            raise ValueError(f"max_batch must be at least 1, not {max_batch}")
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
                self.net = AutoModelForCausalLM.from_pretrained(
                    folder, local_files_only=True, attn_implementation=attn, **{dtype_arg: torch_dtype}
                )
        except (OSError, ValueError, KeyError, ImportError) as error:
            raise BackendUnavailableError(f"cannot load a causal LM from {folder}: {error}") from None
        self.net.to(self.device)
        self.net.eval()
        self.max_batch = int(max_batch)
        text_config = self.net.config.get_text_config() if hasattr(self.net.config, "get_text_config") else self.net.config
        window = getattr(text_config, "max_position_embeddings", None) or getattr(self.tokenizer, "model_max_length", 0)
        self.context_window = int(window) if window and window < 10_000_000 else 2048
        self.pad_id = self._pad_id()
        self.eos_ids = self._eos_ids()
        forward = inspect.signature(self.net.forward).parameters
        self._cache_arg = "cache" if "cache" in forward else "past_key_values"
        self._logits_to_keep = "logits_to_keep" in forward
        self._prefix = _PrefixCache(int(prefix_cache), int(float(prefix_cache_mb) * 2**20))
        self._reusable: bool | None = None  # plain full-attention caches only (see _plain_cache)
        self._growing: Any = None
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
            raise ValueError(f"dtype must be float32, bfloat16, float16 or auto, not {name!r}")
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
            text = self.tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
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
            self.net = None  # type: ignore[assignment]
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

    def _forward(self, input_ids: Any, mask: Any | None, positions: Any, cache: Any, keep: int = 1) -> tuple[Any, Any]:
        """Logits (batch, keep, V) of the last `keep` input columns (a verify pass needs them all), and the cache."""
        kwargs: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": mask,
            "position_ids": positions,
            self._cache_arg: cache,
            "use_cache": True,
        }
        if self._logits_to_keep:
            kwargs["logits_to_keep"] = keep
        output = self.net(**kwargs)
        new_cache = getattr(output, "cache", None)
        if new_cache is None:
            new_cache = output.past_key_values
        return output.logits[:, -keep:, :].float(), new_cache

    def _mask(self, allowed: Any) -> Any:
        """Additive float mask (batch, 1, queries, keys) from a boolean `allowed`."""
        torch = self._torch
        dtype = self.net.dtype if self.net.dtype.is_floating_point else torch.float32
        mask = torch.zeros(allowed.shape, dtype=dtype, device=self.device)
        return mask.masked_fill_(~allowed, torch.finfo(dtype).min)[:, None]

    def _causal_mask(self, valid: Any, queries: int) -> Any | None:
        """The mask of the last `queries` columns: each sees valid columns up to itself, and always itself (so a
        padding query never has an empty row, which would give NaN). None without padding: the model's own
        causal mask (with the cache offset) is exact then, and faster."""
        if bool(valid.all()):
            return None
        torch = self._torch
        total = valid.shape[1]
        columns = torch.arange(total, device=self.device)
        query_columns = total - queries + torch.arange(queries, device=self.device)
        causal = columns[None, :] <= query_columns[:, None]
        return self._mask((valid[:, None, :] & causal[None]) | (columns[None, :] == query_columns[:, None])[None])

    def _plain_cache(self) -> bool:
        """Whether this model's cache is plain full attention (one DynamicLayer per layer): the
        layout prefix reuse and the growing buffers rely on. Sliding-window, linear-attention and
        older transformers caches are used as the model makes them."""
        if self._reusable is None:
            try:
                from transformers import DynamicCache

                layers = DynamicCache(config=self.net.config).layers
                self._reusable = bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)
                self._growing = _growing_layer_class() if self._reusable else None
            except (ImportError, TypeError, AttributeError):
                self._reusable, self._growing = False, None
        return self._reusable

    def _new_cache(self, reserve: int) -> Any:
        from transformers import DynamicCache

        if self._plain_cache() and self._growing is not None:
            cache = DynamicCache()
            cache.layer_class_to_replicate = functools.partial(self._growing, reserve=reserve)
            return cache
        try:
            return DynamicCache(config=self.net.config)
        except TypeError:  # older transformers
            return DynamicCache()

    def _row_layers(self, cache: Any, row: int, valid: Any) -> list[tuple[Any, Any]]:
        """One row's keys/values at its real-token columns (`valid`), out of the batch cache.

        A lone unpadded row is kept by reference: DynamicLayer grows by concatenation into new
        tensors, so what the cache held never changes. Otherwise the row is copied out (a view
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

    def _generate_chunk(self, prompts: list[list[int]], params: GenerationParams, started: float) -> list[list[Completion]]:
        torch = self._torch
        device = self.device
        batch = len(prompts)

        # 1. prefill: [pad][cached prefix][pad][new suffix] per row
        reuse = self._plain_cache() and self._prefix.enabled
        matches: list[int] = []
        prefixes: list[list[tuple[Any, Any]] | None] = []
        for ids in prompts:
            length, layers = self._prefix.lookup(ids) if reuse else (0, None)
            matches.append(length)
            prefixes.append(layers)
        width_prefix = max(matches)
        width_suffix = max(len(ids) - m for ids, m in zip(prompts, matches, strict=True))
        total = width_prefix + width_suffix
        valid = torch.zeros(batch, total, dtype=torch.bool, device=device)
        input_ids = torch.full((batch, width_suffix), self.pad_id, dtype=torch.long, device=device)
        positions = torch.zeros(batch, width_suffix, dtype=torch.long, device=device)
        for row, (ids, m) in enumerate(zip(prompts, matches, strict=True)):
            suffix = ids[m:]
            valid[row, width_prefix - m : width_prefix] = True
            valid[row, total - len(suffix) :] = True
            input_ids[row, width_suffix - len(suffix) :] = torch.tensor(suffix, dtype=torch.long, device=device)
            positions[row, width_suffix - len(suffix) :] = torch.arange(m, len(ids), device=device)
        longest = max(min(params.max_tokens, self.context_window - len(ids)) for ids in prompts)
        cache = self._new_cache(reserve=longest)
        if width_prefix:
            first = next(layers for layers in prefixes if layers is not None)
            for index in range(len(first)):
                if batch == 1:  # no padding to add: the cached tensors themselves (update copies them)
                    cache.update(first[index][0][:, :, :width_prefix], first[index][1][:, :, :width_prefix], index)
                    continue
                shape = list(first[index][0].shape)
                shape[0], shape[2] = batch, width_prefix
                keys = first[index][0].new_zeros(shape)
                values = first[index][1].new_zeros(shape[:3] + [first[index][1].shape[3]])
                for row, layers in enumerate(prefixes):
                    if layers is not None:
                        m = matches[row]
                        keys[row, :, width_prefix - m :] = layers[index][0][0, :, :m]
                        values[row, :, width_prefix - m :] = layers[index][1][0, :, :m]
                cache.update(keys, values, index)
            self._prefix.stats.reused_tokens += sum(matches)
        logits, cache = self._forward(input_ids, self._causal_mask(valid, width_suffix), positions, cache)
        if reuse:
            for row, ids in enumerate(prompts):
                self._prefix.store(ids, self._row_layers(cache, row, valid[row]))

        # 2. one row per completion
        n = params.n
        rows = [conversation for conversation in range(batch) for _ in range(n)]
        if n > 1:
            select = torch.tensor(rows, device=device)
            cache.batch_select_indices(select)
            valid, logits = valid[select], logits[select]
        generators: list[Any] = []
        if not params.greedy and params.seed is not None:
            for row, conversation in enumerate(rows):
                generator = torch.Generator(device=device)
                generator.manual_seed(_completion_seed(params.seed, row - conversation * n, prompts[conversation]))
                generators.append(generator)
        limits = [min(params.max_tokens, self.context_window - len(prompts[c])) for c in rows]
        generated: list[list[int]] = [[] for _ in rows]
        results: list[Completion | None] = [None] * len(rows)
        active = list(range(len(rows)))  # batch position -> row

        # 3. decode: each pass feeds every row's last token and its draft (none without lookup), left-aligned
        lookup = self.lookup if self.lookup.enabled and self._plain_cache() else None
        indexes = [NgramIndex(lookup.ngram) for _ in rows] if lookup is not None else []
        drafts: list[list[int]] = [[] for _ in rows]
        base = 0  # first column of the last pass's block (0: the logits came from the prefill)
        while True:
            scores = logits if params.greedy else target_probs(logits, params.temperature, params.top_p)
            emitted = accept_rows([drafts[row] for row in active], scores, sample=not params.greedy,
                                  generators=[generators[row] for row in active] if generators else None)
            used: list[int] = []  # per position: tokens of `emitted` taken (the rest come after the end)
            finished: list[int] = []
            for position, row in enumerate(active):
                done, count = None, 0
                while done is None and count < len(emitted[position]):
                    token = emitted[position][count]
                    generated[row].append(token)
                    count += 1
                    done = self._finish(row, rows[row], token, generated[row], limits[row], params, prompts, matches,
                                        started)
                used.append(count)
                if base:
                    self.lookup_stats.record(len(drafts[row]), len(emitted[position]) - 1, count)
                if done is not None:
                    results[row] = done
                    finished.append(position)
            if base:  # kept: the last token fed and the draft tokens taken; the rest of the block is padding now
                for position, count in enumerate(used):
                    valid[position, base + count :] = False
            for position in finished:
                row = active[position]
                if reuse and n == 1:  # keep prompt + answer: the next turn of this conversation extends it
                    ids = prompts[rows[row]] + generated[row][:-1]
                    if int(valid[position].sum()) == len(ids):
                        self._prefix.store(ids, self._row_layers(cache, position, valid[position]))
            if finished:
                keep = [position for position in range(len(active)) if position not in set(finished)]
                if not keep:
                    break
                select = torch.tensor(keep, device=device)
                cache.batch_select_indices(select)
                valid = valid[select]
                active = [active[position] for position in keep]
            if base:  # columns no row kept: cropped, so the cache grows by what was accepted
                last = int(valid.any(dim=0).nonzero().max()) + 1
                if last < valid.shape[1]:
                    cache.crop(last - valid.shape[1])
                    valid = valid[:, :last]
            for row in active:
                context = prompts[rows[row]] + generated[row]
                room = min(lookup.draft, limits[row] - len(generated[row]) - 1) if lookup is not None else 0
                drafts[row] = indexes[row].draft(context, room, self.eos_ids) if room > 0 else []
            width = 1 + max(len(drafts[row]) for row in active)
            input_ids = torch.full((len(active), width), self.pad_id, dtype=torch.long)
            positions = torch.zeros((len(active), width), dtype=torch.long)
            block = torch.zeros((len(active), width), dtype=torch.bool)
            for position, row in enumerate(active):
                fed = [generated[row][-1], *drafts[row]]
                first = len(prompts[rows[row]]) + len(generated[row]) - 1
                input_ids[position, : len(fed)] = torch.tensor(fed, dtype=torch.long)
                positions[position, :] = torch.arange(first, first + width)
                block[position, : len(fed)] = True
            base = valid.shape[1]
            valid = torch.cat([valid, block.to(device)], dim=1)
            logits, cache = self._forward(input_ids.to(device), self._causal_mask(valid, width), positions.to(device),
                                          cache, keep=width)

        return [[results[row] for row in range(c * n, (c + 1) * n)] for c in range(batch)]  # type: ignore[misc]

    def _finish(
        self,
        row: int,
        conversation: int,
        token: int,
        tokens: list[int],
        limit: int,
        params: GenerationParams,
        prompts: list[list[int]],
        matches: list[int],
        started: float,
    ) -> Completion | None:
        """The completion if this row is done (end of turn, a stop string, the length limit), else None."""
        ended = token in self.eos_ids
        text: str | None = None
        reason = "stop"
        if params.stop and not ended:
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            cut = min((i for i in (text.find(s) for s in params.stop if s) if i >= 0), default=-1)
            if cut >= 0:
                text, ended = text[:cut], True
        if not ended and len(tokens) >= limit:
            ended, reason = True, "length"
        if not ended:
            return None
        if text is None:
            body = tokens[:-1] if token in self.eos_ids else tokens
            text = self.tokenizer.decode(body, skip_special_tokens=True)
            if params.stop:
                cut = min((i for i in (text.find(s) for s in params.stop if s) if i >= 0), default=-1)
                text = text[:cut] if cut >= 0 else text
        # with n > 1 the prompt is counted once, on the first choice (the Completion convention)
        first = row == conversation * params.n
        prompt = len(prompts[conversation]) if first else 0
        cached = matches[conversation] if first else 0
        return Completion(
            text=text,
            finish_reason=reason,
            prompt_tokens=prompt,
            completion_tokens=len(tokens),
            cached_tokens=cached,
            latency_s=round(time.perf_counter() - started, 6),
            cost_usd=0.0,
            model=self.model,
            backend=self.backend,
            extra={"prefill_tokens": prompt - cached}
            | ({"json_schema": "not enforced (no guided decoding in the hf backend)"} if params.json_schema else {}),
        )


def from_spec(spec: ModelSpec) -> HFLLM:
    """The factory `worldsmith.llm.spec.make_llm` calls for `tiny:` and `hf:` specs."""
    options = {key: value for key, value in spec.options.items() if key in _OPTIONS + _LOOKUP_OPTIONS}
    return HFLLM(spec.model, backend=spec.kind, spec=spec.text, **options)
