"""The policy model and the two computations every EnvACE part shares.

- `segment_allowed`: which key each query may attend to when rehearse segments sit inside the
  agent's view (a segment sees the view before it and itself; the view never sees a segment);
- `target_logprobs`: one forward pass over packed streams giving the log-probability of every
  target token from the logits of the token that precedes it *in its own context* (for a token
  right after a segment that is not the previous column).

Model loading is here too (local folders only, float32 on CPU, bfloat16 on GPU by default, LoRA
through peft when asked), so the trainer, the probe and the sweep load checkpoints the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from worldsmith.envace.data import IGNORE, ROLE_NONE, DualRoleStream
from worldsmith.llm.decoding import additive_mask, mask_dtype
from worldsmith.util.errors import MissingFileError

if TYPE_CHECKING:
    import torch

    from worldsmith.envace.config import LoraSettings

__all__ = [
    "PackedBatch",
    "collate_streams",
    "load_policy",
    "previous_columns",
    "resolve_device",
    "segment_allowed",
    "target_logprobs",
]


def resolve_device(device: str | None) -> torch.device:
    import torch

    return torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))


def load_policy(
    path: str | Path,
    *,
    device: str | None = None,
    dtype: str | None = None,
    lora: LoraSettings | None = None,
) -> tuple[Any, Any]:
    """(model, tokenizer) from a local Hugging Face folder (a run's checkpoint is one), never a hub."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    folder = Path(path).expanduser()
    if not (folder / "config.json").is_file():
        raise MissingFileError(f"model: {folder} is not a Hugging Face model folder (no config.json)")
    target = resolve_device(device)
    name = dtype or ("float32" if target.type == "cpu" else "bfloat16")
    torch_dtype = getattr(torch, name)
    dtype_arg = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder, local_files_only=True)
        model: Any = AutoModelForCausalLM.from_pretrained(  # a PreTrainedModel, or a PeftModel once wrapped
            folder, local_files_only=True, attn_implementation="sdpa", **{dtype_arg: torch_dtype}
        )
    finally:
        if bars:
            hf_logging.enable_progress_bar()
    model.to(target)
    if lora is not None:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError:
            raise ImportError("lora needs peft: pip install 'worldsmith[envace]'") from None
        model = get_peft_model(model, LoraConfig(r=lora.r, lora_alpha=lora.alpha, lora_dropout=lora.dropout,
                                                 target_modules=list(lora.target_modules), task_type="CAUSAL_LM"))
    return model, tokenizer


def segment_allowed(
    key_segments: torch.Tensor, key_valid: torch.Tensor, query_segments: torch.Tensor, offset: int
) -> torch.Tensor:
    """Boolean (batch, queries, keys): what each query may see.

    Queries are the last `queries` columns of the keys (`offset` = keys - queries). A key is seen
    when it is valid, not after the query, and in the agent's view (segment 0) or the query's own
    segment; every query sees itself, so a padding row never has an empty row (NaN).
    """
    import torch

    keys = key_segments.shape[1]
    queries = query_segments.shape[1]
    columns = torch.arange(keys, device=key_segments.device)
    query_columns = offset + torch.arange(queries, device=key_segments.device)
    causal = columns[None, :] <= query_columns[:, None]  # (q, k)
    same = (key_segments[:, None, :] == 0) | (key_segments[:, None, :] == query_segments[:, :, None])
    allowed = key_valid[:, None, :] & same & causal[None]
    return allowed | (columns[None, :] == query_columns[:, None])[None]


def previous_columns(segments: Sequence[int]) -> list[int]:
    """For each column, the column of the token before it in its own context (-1 for the first).

    In the agent's view that is the last agent column; in a segment, the previous column of the
    segment, or the agent column the segment was inserted after.
    """
    previous: list[int] = []
    last_agent = -1
    last_in: dict[int, int] = {}
    for column, segment in enumerate(segments):
        if segment == 0:
            previous.append(last_agent)
            last_agent = column
        else:
            previous.append(last_in.get(segment, last_agent))
            last_in[segment] = column
    return previous


@dataclass
class PackedBatch:
    """Streams as right-padded tensors plus the (row, column) of every target token."""

    input_ids: torch.Tensor  # (B, L)
    positions: torch.Tensor  # (B, L)
    segments: torch.Tensor  # (B, L)
    valid: torch.Tensor  # (B, L) bool
    rows: torch.Tensor  # (T,) row of each target token
    columns: torch.Tensor  # (T,) its column
    previous: torch.Tensor  # (T,) the column whose logits predict it
    labels: torch.Tensor  # (T,) its token id
    roles: torch.Tensor  # (T,) its role id

    @property
    def tokens(self) -> int:
        return int(self.valid.sum())


def collate_streams(streams: Sequence[DualRoleStream], pad_id: int, device: Any) -> PackedBatch:
    import torch

    width = max(len(stream) for stream in streams)
    batch = len(streams)
    ids = torch.full((batch, width), pad_id, dtype=torch.long)
    positions = torch.zeros((batch, width), dtype=torch.long)
    segments = torch.zeros((batch, width), dtype=torch.long)
    valid = torch.zeros((batch, width), dtype=torch.bool)
    rows, columns, previous, labels, roles = [], [], [], [], []
    for row, stream in enumerate(streams):
        n = len(stream)
        ids[row, :n] = torch.tensor(stream.ids)
        positions[row, :n] = torch.tensor(stream.positions)
        segments[row, :n] = torch.tensor(stream.segments)
        valid[row, :n] = True
        before = previous_columns(stream.segments)
        for column, (label, role) in enumerate(zip(stream.labels, stream.roles, strict=True)):
            if label != IGNORE and role != ROLE_NONE and before[column] >= 0:
                rows.append(row)
                columns.append(column)
                previous.append(before[column])
                labels.append(label)
                roles.append(role)
    as_long = {"dtype": torch.long, "device": device}
    return PackedBatch(
        input_ids=ids.to(device), positions=positions.to(device), segments=segments.to(device), valid=valid.to(device),
        rows=torch.tensor(rows, **as_long), columns=torch.tensor(columns, **as_long),
        previous=torch.tensor(previous, **as_long), labels=torch.tensor(labels, **as_long),
        roles=torch.tensor(roles, **as_long),
    )


def _decoder_and_head(model: Any) -> tuple[Any, Any]:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return base.get_decoder(), base.get_output_embeddings()


def target_logprobs(model: Any, batch: PackedBatch, *, temperature: float = 1.0) -> torch.Tensor:
    """Log-probabilities (T,) of the batch's target tokens, differentiable; one forward pass.

    The decoder runs once over every stream with the segment mask; the output head runs only
    on the columns that predict a target (a large vocabulary never materialises B×L×V logits).
    """
    import torch

    decoder, head = _decoder_and_head(model)
    dtype = next(model.parameters()).dtype
    allowed = segment_allowed(batch.segments, batch.valid, batch.segments, 0)
    mask = additive_mask(allowed, mask_dtype(dtype))
    hidden = decoder(input_ids=batch.input_ids, attention_mask=mask, position_ids=batch.positions,
                     use_cache=False).last_hidden_state
    logits = head(hidden[batch.rows, batch.previous]).float()
    if temperature != 1.0:
        logits = logits / temperature
    return torch.log_softmax(logits, dim=-1).gather(1, batch.labels[:, None]).squeeze(1)
