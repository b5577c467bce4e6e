"""The tiny default model: a chat LM of a few million parameters, trained here on CPU from traces.

Why it exists: tests, the workbench and every pipeline stage need *some* model that runs anywhere
without a download. `train_tiny` builds one in a few minutes from recorded episodes, in both roles
EnvACE uses (agent: history -> next action; environment: history + action -> observation), and
saves it as an ordinary Hugging Face folder (safetensors weights, a byte-level BPE tokenizer with a
ChatML chat template, a generation config), so the `hf`/`tiny` backend and any transformers tool
load it like any other local model. `worldsmith_tiny.json` in the folder records how it was made.

    from worldsmith.llm.tiny import TinyConfig, train_tiny
    report = train_tiny(dataset.iter_episodes(), "models/tiny", config=TinyConfig(steps=300))
"""

from __future__ import annotations

import json
import math
import os
import platform
import random
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from worldsmith.llm.base import Message
from worldsmith.llm.training import Optimization, OptimizationSettings, next_indexes, save_pretrained, staged_folder
from worldsmith.traces.actions import action_line
from worldsmith.traces.model import Episode
from worldsmith.util.errors import BadInputError
from worldsmith.util.text import clip

__all__ = [
    "CHAT_TEMPLATE",
    "REPORT_FILE",
    "SPECIAL_TOKENS",
    "TinyConfig",
    "TinyReport",
    "TrainProgress",
    "agent_messages",
    "environment_messages",
    "render_chat",
    "train_tiny",
]

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)
REPORT_FILE = "worldsmith_tiny.json"

# ChatML, as Qwen and many others use it: any role (system/user/assistant/tool), an optional name.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{ '<|im_start|>' + message['role'] }}"
    "{%- if message.get('name') %}{{ ' ' + message['name'] }}{% endif -%}"
    "{{ '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}"
)

AGENT_SYSTEM = "You are an agent in the text environment {env}.\nTask: {task}\nReply with your next action only."
ENVIRONMENT_SYSTEM = (
    "You are the text environment {env}.\nThe agent's task: {task}\n"
    "Each user message is the agent's action; reply with exactly what the environment shows."
)
START = "(start)"


def render_chat(messages: Sequence[Message], add_generation_prompt: bool = False) -> str:
    """The text `CHAT_TEMPLATE` renders (its Python twin: training text must match inference text)."""
    parts = []
    for message in messages:
        name = message.get("name")
        parts.append(f"{IM_START}{message['role']}{' ' + name if name else ''}\n{message['content']}{IM_END}\n")
    if add_generation_prompt:
        parts.append(f"{IM_START}assistant\n")
    return "".join(parts)


# ---------------------------------------------------------------------------------------------
# Episodes -> chat conversations


def __getattr__(name: str) -> Any:
    """`action_text`, this module's old name for `traces.action_line`, still resolves (with a warning)."""
    if name == "action_text":
        warnings.warn(
            "worldsmith.llm.tiny.action_text is deprecated: use worldsmith.traces.action_line",
            DeprecationWarning,
            stacklevel=2,
        )
        return action_line
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _env_name(episode: Episode) -> str:
    return episode.env_id or "unknown"


def agent_messages(episode: Episode, *, max_chars: int = 1500) -> list[Message]:
    """The agent's view: system (environment, task), then observation -> action exchanges.

    User messages recorded between actions (e.g. BFCL's follow-up requests) join the observation
    that precedes the action, so the model sees what the agent saw.
    """
    task = (episode.task or "").strip() or "(none given)"
    messages: list[Message] = [{"role": "system", "content": AGENT_SYSTEM.format(env=_env_name(episode), task=task)}]
    pending: list[str] = []
    if episode.initial_observation is not None and episode.initial_observation.text.strip():
        pending.append(episode.initial_observation.text)
    for turn in episode.turns:
        for event in turn.context:
            content = event.content.strip()
            if event.role in ("user", "system") and content and content != task:
                pending.append(content)
        messages.append({"role": "user", "content": clip("\n\n".join(pending) or START, max_chars)})
        messages.append({"role": "assistant", "content": clip(action_line(turn.action), max_chars)})
        pending = [turn.observation.text]
    return messages if len(messages) > 1 else []


def environment_messages(episode: Episode, *, max_chars: int = 1500) -> list[Message]:
    """The environment's view: system (environment, task), then action -> observation exchanges.

    The first exchange asks for the opening observation (`(start)`) when the episode recorded one.
    """
    task = (episode.task or "").strip() or "(none given)"
    system = ENVIRONMENT_SYSTEM.format(env=_env_name(episode), task=task)
    messages: list[Message] = [{"role": "system", "content": system}]
    if episode.initial_observation is not None and episode.initial_observation.text.strip():
        messages.append({"role": "user", "content": START})
        messages.append({"role": "assistant", "content": clip(episode.initial_observation.text, max_chars)})
    for turn in episode.turns:
        messages.append({"role": "user", "content": clip(action_line(turn.action), max_chars)})
        messages.append({"role": "assistant", "content": clip(turn.observation.text or "(nothing)", max_chars)})
    return messages if len(messages) > 1 else []


# ---------------------------------------------------------------------------------------------
# Configuration and report


@dataclass(frozen=True)
class TinyConfig:
    """How to build and train the tiny model. Defaults: 2.3M parameters, a 4,096-token window, 100 steps of
    4,096 tokens (about 500 CPU-seconds: a few minutes on 2 free CPU cores).

    The window is only as good as the distances training showed: rows are `seq_len` tokens, packed two ways
    (see `document_rows`), so attention sees every distance up to `context_length` and a prompt that fills
    the window is read like the ones it was trained on.
    """

    # model (a Llama-architecture decoder)
    vocab_size: int = 3072
    hidden_size: int = 192
    intermediate_size: int = 512
    num_layers: int = 4
    num_heads: int = 3  # head_dim 64: a size every attention kernel has (vLLM's CPU backend needs 32, 64, 80, ...)
    num_kv_heads: int = 3
    context_length: int = 4096
    rope_theta: float = 10000.0  # Llama 2's, which it trained at 4,096 positions
    # data
    roles: tuple[str, ...] = ("agent", "environment")
    max_message_chars: int = 1500
    max_episodes: int | None = None
    # training
    seq_len: int = 4096
    document_rows: bool = True  # also train on conversations run together, one position count per row
    batch_size: int = 1
    steps: int | None = 100  # optimizer steps; None: derive from `epochs`
    epochs: float = 4.0  # used only when steps is None
    lr: float = 1.5e-3  # half the 8 x 512 rows' rate: one row a step, all from one text when a document row
    min_lr_ratio: float = 0.1
    warmup_steps: int = 10
    weight_decay: float = 0.05
    grad_clip: float = 1.0
    seed: int = 0
    max_minutes: float = 10.0  # safety stop; the run is still saved (report.stopped_early)
    threads: int | None = None  # None: torch's default, which honours OMP_NUM_THREADS
    save_dtype: str = "bfloat16"  # weights on disk; "float32" for exact reproduction of training numerics

    def __post_init__(self) -> None:
        for role in self.roles:
            if role not in ("agent", "environment"):
                raise BadInputError(f"roles must be 'agent' and/or 'environment', not {role!r}")
        if not self.roles:
            raise BadInputError("roles must name at least one of 'agent', 'environment'")
        if self.seq_len > self.context_length:
            raise BadInputError(f"seq_len ({self.seq_len}) must not exceed context_length ({self.context_length})")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise BadInputError("hidden_size must divide by num_heads, and num_heads by num_kv_heads")
        if self.save_dtype not in ("float32", "bfloat16", "float16"):
            raise BadInputError(f"save_dtype must be float32, bfloat16 or float16, not {self.save_dtype!r}")
        if self.rope_theta <= 0:
            raise BadInputError(f"rope_theta must be positive, not {self.rope_theta}")
        if self.vocab_size < 300:
            raise BadInputError("vocab_size must be at least 300 (256 bytes + special tokens + merges)")


@dataclass
class TrainProgress:
    """Passed to the progress callback after every optimizer step."""

    step: int
    steps: int
    loss: float
    lr: float  # the rate this step used (`llm.training.Optimization.set_step`)
    tokens: int
    elapsed_s: float

    def __str__(self) -> str:
        return f"step {self.step}/{self.steps} loss {self.loss:.3f} lr {self.lr:.2e} {self.elapsed_s:.0f}s"


@dataclass
class TinyReport:
    """What a training run did and measured (also written to `worldsmith_tiny.json`)."""

    out_dir: str
    parameters: int
    steps: int
    planned_steps: int
    first_loss: float
    last_loss: float
    losses: list[float]
    tokens_trained: int
    seconds: float
    train_seconds: float
    tokens_per_s: float
    threads: int
    stopped_early: bool
    data: dict[str, Any] = field(default_factory=dict)
    weights_bytes: int = 0
    config: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    trained_on: dict[str, Any] = field(default_factory=dict)  # where the episodes came from (dataset, split, ...)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------------------------------------
# Tokenizer and samples


def _train_tokenizer(texts: Iterable[str], vocab_size: int) -> Any:
    """A byte-level BPE (no unknown tokens) trained on the message texts, plus the ChatML specials."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer=trainer)
    return tokenizer


@dataclass
class _Sample:
    ids: list[int]
    train: list[bool]  # predict this token (assistant content and its <|im_end|>)


def _encode_chat(tokenizer: Any, messages: Sequence[Message]) -> _Sample:
    """Token ids of the rendered chat, and which of them are assistant output (found by character offsets)."""
    text = render_chat(messages)
    spans: list[tuple[int, int]] = []
    cursor = 0
    for message in messages:
        block = render_chat([message])
        if message["role"] == "assistant":
            start = cursor + block.index("\n") + 1
            spans.append((start, cursor + len(block) - 1))  # content + <|im_end|>, not the newline
        cursor += len(block)
    encoding = tokenizer.encode(text, add_special_tokens=False)
    train = []
    span_index = 0
    for start, _ in encoding.offsets:
        while span_index < len(spans) and start >= spans[span_index][1]:
            span_index += 1
        train.append(span_index < len(spans) and spans[span_index][0] <= start < spans[span_index][1])
    return _Sample(list(encoding.ids), train)


def _chunk_messages(tokenizer: Any, messages: list[Message], seq_len: int) -> list[list[Message]]:
    """Split a long conversation into pieces that fit `seq_len`, each starting with the system message."""
    header, exchanges = messages[:1], [messages[i : i + 2] for i in range(1, len(messages), 2)]
    header_len = len(tokenizer.encode(render_chat(header), add_special_tokens=False).ids)
    chunks: list[list[Message]] = []
    current: list[Message] = []
    length = header_len
    for exchange in exchanges:
        size = len(tokenizer.encode(render_chat(exchange), add_special_tokens=False).ids)
        if current and length + size > seq_len:
            chunks.append(header + current)
            current, length = [], header_len
        current.extend(exchange)
        length += size
    if current:
        chunks.append(header + current)
    return chunks


def _pack(samples: list[_Sample], seq_len: int, pad_id: int) -> list[tuple[list[int], list[int], list[int]]]:
    """Greedily pack samples into rows of `seq_len`: (ids, labels, position ids restarting per sample)."""
    rows: list[tuple[list[int], list[int], list[int]]] = []
    ids: list[int] = []
    labels: list[int] = []
    positions: list[int] = []

    def flush() -> None:
        if ids:
            pad = seq_len - len(ids)
            rows.append((ids + [pad_id] * pad, labels + [-100] * pad, positions + list(range(pad))))

    for sample in samples:
        sample_ids, sample_train = sample.ids[:seq_len], sample.train[:seq_len]
        if len(ids) + len(sample_ids) > seq_len:
            flush()
            ids, labels, positions = [], [], []
        ids = ids + sample_ids
        labels = labels + [tok if keep else -100 for tok, keep in zip(sample_ids, sample_train, strict=True)]
        positions = positions + list(range(len(sample_ids)))
    flush()
    return rows


# ---------------------------------------------------------------------------------------------
# Training


def _documents(samples: list[_Sample], seq_len: int, pad_id: int) -> list[tuple[list[int], list[int], list[int]]]:
    """The samples run together as one text cut into rows of `seq_len`, positions 0..seq_len-1 in every row.

    Conversations are rarely as long as the window; here attention spans several of them, so training sees
    every distance (and every position) up to `seq_len`. The last row is padded as `_pack` pads.
    """
    ids = [token for sample in samples for token in sample.ids]
    labels = [tok if keep else -100 for sample in samples for tok, keep in zip(sample.ids, sample.train, strict=True)]
    rows: list[tuple[list[int], list[int], list[int]]] = []
    for start in range(0, len(ids), seq_len):
        row_ids, row_labels = ids[start : start + seq_len], labels[start : start + seq_len]
        pad = seq_len - len(row_ids)
        positions = list(range(len(row_ids))) + list(range(pad))
        rows.append((row_ids + [pad_id] * pad, row_labels + [-100] * pad, positions))
    return rows


def _versions() -> dict[str, str]:
    import tokenizers
    import torch
    import transformers

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "python": platform.python_version(),
    }


def _conversations(episodes: Iterable[Episode], config: TinyConfig) -> tuple[list[list[Message]], int, int]:
    """The training conversations of the configured roles (empty ones dropped), the episodes read and their
    turns (`max_episodes` at most)."""
    conversations: list[list[Message]] = []
    episode_count = turn_count = 0
    for episode in episodes:
        if config.max_episodes is not None and episode_count >= config.max_episodes:
            break
        episode_count += 1
        turn_count += len(episode.turns)
        if "agent" in config.roles:
            conversations.append(agent_messages(episode, max_chars=config.max_message_chars))
        if "environment" in config.roles:
            conversations.append(environment_messages(episode, max_chars=config.max_message_chars))
    return [messages for messages in conversations if messages], episode_count, turn_count


def _new_model(config: TinyConfig, vocab_size: int, *, pad_id: int, end_id: int) -> Any:
    """A freshly initialised Llama-architecture decoder of the configured size (torch's RNG draws its weights)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    rope: dict[str, Any] = {"rope_theta": config.rope_theta}  # transformers 5 files it under rope_parameters
    model_config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=config.hidden_size,
        intermediate_size=config.intermediate_size,
        num_hidden_layers=config.num_layers,
        num_attention_heads=config.num_heads,
        num_key_value_heads=config.num_kv_heads,
        max_position_embeddings=config.context_length,
        **rope,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=end_id,
        pad_token_id=pad_id,
        attention_dropout=0.0,
    )
    return LlamaForCausalLM(model_config)


def _hf_tokenizer(tokenizer: Any, context_length: int) -> Any:
    """The trained `tokenizers` BPE as a transformers tokenizer with the ChatML template and specials."""
    from transformers import PreTrainedTokenizerFast

    hf_tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        eos_token=IM_END,
        pad_token=PAD,
        additional_special_tokens=[IM_START],
        model_max_length=context_length,
        padding_side="left",
        chat_template=CHAT_TEMPLATE,
    )
    hf_tokenizer.chat_template = CHAT_TEMPLATE
    return hf_tokenizer


def train_tiny(
    episodes: Iterable[Episode],
    out_dir: str | Path,
    *,
    config: TinyConfig = TinyConfig(),  # noqa: B008 - frozen dataclass, safe as a default
    progress: Callable[[TrainProgress], None] | None = None,
    trained_on: Mapping[str, Any] | None = None,
) -> TinyReport:
    """Train the tiny chat model on `episodes` and save it as a Hugging Face folder at `out_dir`.

    `trained_on` says where the episodes came from (e.g. `{"dataset": "shop", "split": "train"}`); it is kept in
    the folder's report, so whoever uses the model later can say what it learnt from (`llm.indomain.trained_on`).

    Deterministic for a seed (same data, config, thread count and library versions give the same
    weights). The folder is written beside `out_dir` first and swapped in at the end, so a failed
    run never leaves half a model behind.
    """
    import torch
    from transformers import GenerationConfig

    started = time.perf_counter()
    out = Path(out_dir)
    if config.threads is not None:
        torch.set_num_threads(config.threads)
    rng = random.Random(config.seed)

    # 1. conversations, both roles
    conversations, episode_count, turn_count = _conversations(episodes, config)
    if not conversations:
        raise BadInputError("no episodes with turns to train on")

    # 2. tokenizer, on the message texts (roles included so their names become single tokens)
    texts = [message["content"] for messages in conversations for message in messages]
    texts += ["system", "user", "assistant", "tool"] * 8
    tokenizer = _train_tokenizer(texts, config.vocab_size)
    pad_id, start_id, end_id = (tokenizer.token_to_id(token) for token in SPECIAL_TOKENS)

    # 3. samples: conversations cut to seq_len at exchange boundaries, shuffled, packed into rows
    samples = [
        _encode_chat(tokenizer, chunk)
        for messages in conversations
        for chunk in _chunk_messages(tokenizer, messages, config.seq_len)
    ]
    rng.shuffle(samples)
    rows = _pack(samples, config.seq_len, pad_id)
    packed_rows = len(rows)
    if config.document_rows:
        rows += _documents(samples, config.seq_len, pad_id)
    sample_tokens = sum(len(sample.ids) for sample in samples)
    target_tokens = sum(sum(sample.train) for sample in samples)
    rows_per_epoch = len(rows)
    steps = (
        config.steps
        if config.steps is not None
        else max(1, math.ceil(config.epochs * rows_per_epoch / config.batch_size))
    )

    # 4. model
    torch.manual_seed(config.seed)
    model = _new_model(config, tokenizer.get_vocab_size(), pad_id=pad_id, end_id=end_id)
    model.train()
    parameters = sum(parameter.numel() for parameter in model.parameters())
    optimization = Optimization(model, OptimizationSettings(
        lr=config.lr, steps=steps, warmup_steps=config.warmup_steps, min_lr_ratio=config.min_lr_ratio,
        weight_decay=config.weight_decay, grad_clip=config.grad_clip,
    ))

    # 5. train: rows in a seeded order, reshuffled every epoch
    ids_all = torch.tensor([row[0] for row in rows], dtype=torch.long)
    labels_all = torch.tensor([row[1] for row in rows], dtype=torch.long)
    positions_all = torch.tensor([row[2] for row in rows], dtype=torch.long)
    order: list[int] = []
    losses: list[float] = []
    tokens_trained = 0
    stopped_early = False
    train_started = time.perf_counter()
    deadline = train_started + config.max_minutes * 60
    for step in range(steps):
        lr = optimization.set_step(step)
        index = torch.tensor(next_indexes(order, rows_per_epoch, config.batch_size, rng))
        input_ids, labels, positions = ids_all[index], labels_all[index], positions_all[index]
        # position ids that restart per sample make transformers mask attention within each packed sample
        logits = model(input_ids=input_ids, position_ids=positions).logits
        loss = torch.nn.functional.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]), labels[:, 1:].reshape(-1), ignore_index=-100
        )
        optimization.step(loss)
        losses.append(round(float(loss.item()), 5))
        tokens_trained += int(input_ids.numel())
        if progress is not None:
            progress(
                TrainProgress(
                    step=step + 1,
                    steps=steps,
                    loss=losses[-1],
                    lr=lr,
                    tokens=tokens_trained,
                    elapsed_s=time.perf_counter() - train_started,
                )
            )
        if time.perf_counter() > deadline and step + 1 < steps:
            stopped_early = True
            break
    train_seconds = time.perf_counter() - train_started

    # 6. save: weights (safetensors), configs, tokenizer with chat template, our report
    model.eval()
    model.generation_config = GenerationConfig(
        eos_token_id=end_id, pad_token_id=pad_id, do_sample=False, max_new_tokens=128
    )
    hf_tokenizer = _hf_tokenizer(tokenizer, config.context_length)
    with staged_folder(out) as staging:
        model.to(getattr(torch, config.save_dtype))
        save_pretrained(staging, model, hf_tokenizer)
        _portable_tokenizer_config(staging / "tokenizer_config.json")
        weights_bytes = sum(path.stat().st_size for path in staging.glob("*.safetensors"))
        report = TinyReport(
            out_dir=str(out),
            parameters=parameters,
            steps=len(losses),
            planned_steps=steps,
            first_loss=losses[0],
            last_loss=round(float(sum(losses[-10:]) / len(losses[-10:])), 5),
            losses=losses,
            tokens_trained=tokens_trained,
            seconds=0.0,
            train_seconds=round(train_seconds, 2),
            tokens_per_s=round(tokens_trained / max(train_seconds, 1e-9), 1),
            threads=torch.get_num_threads(),
            stopped_early=stopped_early,
            data={
                "episodes": episode_count,
                "turns": turn_count,
                "conversations": len(conversations),
                "samples": len(samples),
                "rows": rows_per_epoch,
                "document_rows": rows_per_epoch - packed_rows,
                "tokens": sample_tokens,
                "target_tokens": target_tokens,
                "epochs": round(tokens_trained / max(1, rows_per_epoch * config.seq_len), 2),
                "vocab_size": tokenizer.get_vocab_size(),
            },
            weights_bytes=weights_bytes,
            config={**asdict(config), "roles": list(config.roles)},
            versions=_versions(),
            trained_on=dict(trained_on or {}),
        )
        report.seconds = round(time.perf_counter() - started, 2)
        record = {key: value for key, value in report.to_json().items() if key != "out_dir"}  # the folder is itself
        (staging / REPORT_FILE).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        os.chmod(staging, 0o755)
    return report


def _portable_tokenizer_config(path: Path) -> None:
    """Name the tokenizer class every transformers release knows (5.x writes its own `TokenizersBackend`)."""
    if path.is_file():
        data = json.loads(path.read_text(encoding="utf-8"))
        data["tokenizer_class"] = "PreTrainedTokenizerFast"
        path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
