"""What the two hand-written decoding loops share: masks, padded input blocks, caches, the forward call.

The `hf` backend (`worldsmith.llm.hf`) and the EnvACE training decoder (`worldsmith.envace.generate`)
both run batches of rows of different lengths on one key/value cache, with explicit position ids and
a 4-D additive attention mask that hides padding (and, for EnvACE, other rows' rehearse segments),
and both crop rejected prompt-lookup columns from that cache. One implementation of those pieces
keeps the two loops computing the same thing the same way.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

__all__ = [
    "additive_mask",
    "causal_allowed",
    "causal_mask",
    "forward_arguments",
    "growing_layer_class",
    "mask_dtype",
    "new_cache",
    "pack_rows",
    "plain_cache",
    "run_forward",
]


# ------------------------------------------------------------------ masks


def mask_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype of an additive mask for a model of `dtype` (its own when floating point, else float32)."""
    import torch

    return dtype if dtype.is_floating_point else torch.float32


def additive_mask(allowed: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive float mask (batch, 1, queries, keys) from a boolean one (batch, queries, keys)."""
    import torch

    mask = torch.zeros(allowed.shape, dtype=dtype, device=allowed.device)
    return mask.masked_fill_(~allowed, torch.finfo(dtype).min)[:, None]


def causal_allowed(valid: torch.Tensor, queries: int) -> torch.Tensor:
    """Boolean (batch, queries, keys) for the last `queries` of the `valid` (batch, keys) columns.

    A query sees the valid keys up to itself, and always itself, so a padding query never has an
    empty row (which would give NaN).
    """
    import torch

    total = valid.shape[1]
    columns = torch.arange(total, device=valid.device)
    query_columns = total - queries + torch.arange(queries, device=valid.device)
    causal = columns[None, :] <= query_columns[:, None]
    return (valid[:, None, :] & causal[None]) | (columns[None, :] == query_columns[:, None])[None]


def causal_mask(valid: torch.Tensor, queries: int, dtype: torch.dtype) -> torch.Tensor | None:
    """The additive mask of `causal_allowed`, or None without padding: the model's own causal mask
    (with the cache offset) is exact then, and faster."""
    if bool(valid.all()):
        return None
    return additive_mask(causal_allowed(valid, queries), dtype)


# ------------------------------------------------------------------ input blocks


def pack_rows(
    tokens: Sequence[Sequence[int]],
    positions: Sequence[Sequence[int]],
    *,
    pad_id: int,
    width: int | None = None,
    left: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One padded block (CPU tensors): input ids, position ids (0 at padding) and which columns are real.

    Rows are right-aligned (each row's last token in the last column: a prefill, whose last logits
    are wanted) or left-aligned (a verify pass: the columns a row rejects sit at the right end, where
    they can be cropped). `width` defaults to the longest row.
    """
    import torch

    batch = len(tokens)
    width = max((len(row) for row in tokens), default=0) if width is None else width
    input_ids = torch.full((batch, width), pad_id, dtype=torch.long)
    position_ids = torch.zeros((batch, width), dtype=torch.long)
    valid = torch.zeros((batch, width), dtype=torch.bool)
    for index, (row, row_positions) in enumerate(zip(tokens, positions, strict=True)):
        if not row:
            continue
        columns = slice(0, len(row)) if left else slice(width - len(row), width)
        input_ids[index, columns] = torch.tensor(list(row), dtype=torch.long)
        position_ids[index, columns] = torch.tensor(list(row_positions), dtype=torch.long)
        valid[index, columns] = True
    return input_ids, position_ids, valid


# ------------------------------------------------------------------ caches


@functools.cache
def growing_layer_class() -> type:
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
    import torch
    from transformers.cache_utils import DynamicLayer

    class GrowingLayer(DynamicLayer):
        def __init__(self, reserve: int = 64, **kwargs: Any) -> None:
            super().__init__(**kwargs)
            self.reserve = max(1, int(reserve))
            self._buffers: tuple[torch.Tensor, torch.Tensor] | None = None

        def update(self, key_states: Any, value_states: Any, *args: Any, **kwargs: Any) -> tuple[Any, Any]:
            if not self.is_initialized:
                self.lazy_initialization(key_states, value_states)
            length = self.get_seq_length()
            total = length + key_states.shape[-2]
            keys, values = (self.keys, self.values) if length else (None, None)
            buffers = self._buffers
            if (
                buffers is None
                or buffers[0].shape[-2] < total
                or buffers[0].shape[0] != key_states.shape[0]
                or (keys is not None and keys.data_ptr() != buffers[0].data_ptr())
            ):
                shape_k = (*key_states.shape[:2], total + self.reserve, key_states.shape[-1])
                shape_v = (*value_states.shape[:2], total + self.reserve, value_states.shape[-1])
                buffers = (
                    torch.empty(shape_k, dtype=key_states.dtype, device=key_states.device),
                    torch.empty(shape_v, dtype=value_states.dtype, device=value_states.device),
                )
                if keys is not None and values is not None:
                    buffers[0][:, :, :length] = keys
                    buffers[1][:, :, :length] = values
                self._buffers = buffers
            buffers[0][:, :, length:total] = key_states
            buffers[1][:, :, length:total] = value_states
            self.keys, self.values = buffers[0][:, :, :total], buffers[1][:, :, :total]
            return self.keys, self.values

    return GrowingLayer


def plain_cache(config: Any) -> bool:
    """Whether a model of `config` has a plain full-attention cache (one DynamicLayer per layer): the layout
    prefix reuse, the growing buffers and cropping rely on. Sliding-window, linear-attention and older
    transformers caches are used as the model makes them."""
    try:
        from transformers import DynamicCache

        layers = DynamicCache(config=config).layers
        plain = bool(layers) and all(type(layer).__name__ == "DynamicLayer" for layer in layers)
        if plain:
            growing_layer_class()
        return plain
    except (ImportError, TypeError, AttributeError):
        return False


def new_cache(config: Any, *, plain: bool, reserve: int) -> Any:
    """An empty DynamicCache: with growing layers (`reserve` spare positions) when `plain`, else as the model's
    config makes it."""
    from transformers import DynamicCache

    if plain:
        cache: Any = DynamicCache()  # its layer factory is only called: a partial serves
        cache.layer_class_to_replicate = functools.partial(growing_layer_class(), reserve=reserve)
        return cache
    try:
        return DynamicCache(config=config)
    except TypeError:  # older transformers
        return DynamicCache()


# ------------------------------------------------------------------ the forward pass


def forward_arguments(model: Any) -> tuple[str, bool]:
    """The cache argument's name of `model`'s forward (transformers renamed it) and whether it takes
    `logits_to_keep`; a peft wrapper is seen through."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    parameters = inspect.signature(base.forward).parameters
    return ("cache" if "cache" in parameters else "past_key_values"), "logits_to_keep" in parameters


def run_forward(
    model: Any,
    arguments: tuple[str, bool],
    input_ids: torch.Tensor,
    mask: torch.Tensor | None,
    positions: torch.Tensor,
    cache: Any,
    keep: int = 1,
) -> tuple[torch.Tensor, Any]:
    """Float logits (batch, keep, V) of the last `keep` input columns, and the cache after the pass.

    `arguments` are `forward_arguments(model)`.
    """
    cache_arg, keeps_logits = arguments
    kwargs: dict[str, Any] = {
        "input_ids": input_ids,
        "attention_mask": mask,
        "position_ids": positions,
        cache_arg: cache,
        "use_cache": True,
    }
    if keeps_logits:
        kwargs["logits_to_keep"] = keep
    output = model(**kwargs)
    new = getattr(output, "cache", None)
    new = new if new is not None else getattr(output, "past_key_values", None)
    return output.logits[:, -keep:, :].float(), (new if new is not None else cache)
