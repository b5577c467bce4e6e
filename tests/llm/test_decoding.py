"""The decoding pieces the hf backend and the EnvACE decoder share: masks, padded blocks, caches, the forward call."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from worldsmith.llm.decoding import (
    additive_mask,
    causal_allowed,
    causal_mask,
    forward_arguments,
    growing_layer_class,
    mask_dtype,
    new_cache,
    pack_rows,
    plain_cache,
    run_forward,
)

torch = pytest.importorskip("torch")
TINY = Path(__file__).resolve().parents[2] / "data_samples" / "models" / "tiny"


def test_rows_are_packed_right_or_left_aligned_with_their_positions() -> None:
    tokens, positions = [[7, 8, 9], [5], []], [[10, 11, 12], [3], []]
    ids, pos, valid = pack_rows(tokens, positions, pad_id=0)
    assert ids.tolist() == [[7, 8, 9], [0, 0, 5], [0, 0, 0]]
    assert pos.tolist() == [[10, 11, 12], [0, 0, 3], [0, 0, 0]]
    assert valid.tolist() == [[True] * 3, [False, False, True], [False] * 3]
    ids, pos, valid = pack_rows(tokens, positions, pad_id=1, left=True, width=4)
    assert ids.tolist() == [[7, 8, 9, 1], [5, 1, 1, 1], [1, 1, 1, 1]]
    assert pos.tolist() == [[10, 11, 12, 0], [3, 0, 0, 0], [0, 0, 0, 0]]
    assert valid.sum(dim=1).tolist() == [3, 1, 0] and ids.dtype == pos.dtype == torch.long


def test_the_causal_mask_hides_padding_but_never_a_querys_own_column() -> None:
    valid = torch.tensor([[True, True, True, True], [False, True, False, True]])
    allowed = causal_allowed(valid, 2)  # queries: columns 2 and 3
    assert allowed.shape == (2, 2, 4)
    assert allowed[0].tolist() == [[True, True, True, False], [True, True, True, True]]
    assert allowed[1].tolist() == [[False, True, True, False], [False, True, False, True]]  # column 2: itself
    mask = causal_mask(valid, 2, torch.float32)
    assert mask is not None and mask.shape == (2, 1, 2, 4)
    assert mask[1, 0, 1].tolist() == [torch.finfo(torch.float32).min, 0.0, torch.finfo(torch.float32).min, 0.0]
    assert causal_mask(valid[:1], 2, torch.float32) is None  # no padding: the model's own mask
    assert additive_mask(allowed, torch.bfloat16).dtype == torch.bfloat16
    assert mask_dtype(torch.float16) == torch.float16 and mask_dtype(torch.int8) == torch.float32


def test_growing_layers_append_in_place_and_never_change_views_handed_out() -> None:
    cache = new_cache(None, plain=True, reserve=4)
    first = torch.arange(2 * 1 * 3 * 2, dtype=torch.float32).reshape(2, 1, 3, 2)
    cache.update(first, first + 100, 0)
    layer = cache.layers[0]
    assert type(layer) is growing_layer_class() and layer.reserve == 4
    held = layer.keys
    step = torch.full((2, 1, 1, 2), -1.0)
    keys, values = cache.update(step, step, 0)
    assert keys.shape == (2, 1, 4, 2) and keys.data_ptr() == held.data_ptr()  # no copy: the same buffer
    assert torch.equal(held, first) and torch.equal(keys[:, :, :3], first) and torch.equal(values[:, :, 3:], step)
    cache.crop(-1)  # a rejected draft column: the next update overwrites it in place
    keys, _ = cache.update(step * 2, step * 2, 0)
    assert keys.shape == (2, 1, 4, 2) and torch.equal(keys[:, :, 3:], step * 2)
    keys, _ = cache.update(torch.zeros(2, 1, 5, 2), torch.zeros(2, 1, 5, 2), 0)  # past the reserve: a new buffer
    assert keys.shape == (2, 1, 9, 2) and keys.data_ptr() != held.data_ptr() and torch.equal(keys[:, :, :3], first)


def test_plain_caches_are_recognised() -> None:
    from transformers import AutoConfig

    config = AutoConfig.from_pretrained(TINY, local_files_only=True)
    assert plain_cache(config)
    assert type(new_cache(config, plain=False, reserve=8)).__name__ == "DynamicCache"
    sliding = AutoConfig.from_pretrained(TINY, local_files_only=True)
    sliding.layer_types = ["sliding_attention"] * sliding.num_hidden_layers
    sliding.sliding_window = 16
    assert not plain_cache(sliding)


class _Model:
    def __init__(self, output: Any) -> None:
        self.output, self.calls = output, []

    def forward(self, input_ids: Any, attention_mask: Any, position_ids: Any, past_key_values: Any,
                use_cache: bool) -> Any:
        return self.output

    def __call__(self, **kwargs: Any) -> Any:
        self.calls.append(kwargs)
        return self.output


class _Wrapper:
    def __init__(self, base: _Model) -> None:
        self.base = base

    def get_base_model(self) -> _Model:
        return self.base

    def __call__(self, **kwargs: Any) -> Any:
        return self.base(**kwargs)


def test_the_forward_call_names_the_cache_as_the_model_does_and_keeps_the_last_logits() -> None:
    logits = torch.arange(2 * 3 * 4, dtype=torch.bfloat16).reshape(2, 3, 4)
    model = _Model(SimpleNamespace(logits=logits, past_key_values="new cache"))
    arguments = forward_arguments(_Wrapper(model))  # seen through the wrapper
    assert arguments == ("past_key_values", False)
    out, cache = run_forward(model, arguments, "ids", None, "positions", "old cache", keep=2)
    assert cache == "new cache" and out.dtype == torch.float32 and torch.equal(out, logits[:, 1:].float())
    assert model.calls[-1] == {"input_ids": "ids", "attention_mask": None, "position_ids": "positions",
                               "past_key_values": "old cache", "use_cache": True}
    silent = _Model(SimpleNamespace(logits=logits))  # a model that fills the cache in place and returns none
    assert run_forward(silent, ("cache", True), "ids", None, "positions", "old cache")[1] == "old cache"
    assert silent.calls[-1]["cache"] == "old cache" and silent.calls[-1]["logits_to_keep"] == 1
