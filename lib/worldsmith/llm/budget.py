"""How many prompt tokens a model takes: its context window and a counter for a conversation.

Prompt builders (the model baselines in `sim.baselines`) fit their conversation to this budget
instead of sending one the backend refuses with `ContextOverflowError`:

    budget = prompt_budget(llm, reply_tokens=256)
    if budget is not None and budget.count(messages) > budget.limit: ...cut the oldest history...

The window is read from the backend (`context_window` of the `hf`/`tiny` backends, vLLM's
`max_model_len`) through wrappers such as `TrackedLLM`, or given by the caller for a backend that
cannot say (an OpenAI-compatible server). Tokens are counted with the backend's own chat template
and tokenizer when it has one (`encode`), else estimated from the characters.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from worldsmith.llm.base import Message

__all__ = ["PromptBudget", "backend_of", "context_window", "estimate_tokens", "prompt_budget"]

CHARS_PER_TOKEN = 3.0  # the estimate's rate: cautious for English and JSON under byte-level BPE tokenizers
MESSAGE_OVERHEAD = 4  # role markers and separators a chat template adds per message (estimate)


def backend_of(llm: Any) -> Any:
    """The backend under any wrappers (objects holding the model they wrap in `.llm`, like `TrackedLLM`)."""
    seen: set[int] = set()
    while hasattr(llm, "llm") and id(llm) not in seen:
        seen.add(id(llm))
        llm = llm.llm
    return llm


def context_window(llm: Any) -> int | None:
    """The model's context window in tokens, when the backend says; None when it cannot (HTTP backends)."""
    backend = backend_of(llm)
    window = getattr(backend, "context_window", None)
    if isinstance(window, int) and window > 0:
        return window
    engine = getattr(backend, "engine_args", None)  # vLLM: the configured max_model_len, else the engine's
    if isinstance(engine, dict) and isinstance(engine.get("max_model_len"), int):
        return int(engine["max_model_len"])
    try:
        length = backend._llm.llm_engine.model_config.max_model_len
    except AttributeError:
        return None
    return int(length) if isinstance(length, int) and length > 0 else None


def estimate_tokens(messages: Sequence[Message]) -> int:
    """Tokens of a conversation estimated from its characters (no tokenizer at hand)."""
    return sum(math.ceil(len(message.get("content", "")) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD
               for message in messages) + MESSAGE_OVERHEAD


@dataclass(frozen=True)
class PromptBudget:
    """The prompt tokens a conversation may use: `limit` = `window` minus the room kept for the reply."""

    window: int
    reply_tokens: int
    count: Callable[[Sequence[Message]], int]
    counted: str  # "tokenizer" (the backend's own template and tokenizer) or "estimate" (characters)

    @property
    def limit(self) -> int:
        return self.window - self.reply_tokens

    def to_json(self) -> dict[str, Any]:
        return {"window": self.window, "reply_tokens": self.reply_tokens, "limit": self.limit, "counted": self.counted}


def prompt_budget(llm: Any, *, reply_tokens: int, window: int | None = None) -> PromptBudget | None:
    """The budget of `llm`'s prompts when its window is known (`window` overrides the backend's), else None.

    The reply keeps `reply_tokens`, at most a quarter of the window: a backend that generates
    until its window is full (`hf`, `tiny`, vLLM) shortens a longer reply rather than failing.
    """
    size = window if window is not None else context_window(llm)
    if size is None or size < 8:
        return None
    backend = backend_of(llm)
    encode = getattr(backend, "encode", None)
    if callable(encode):
        def count(messages: Sequence[Message]) -> int:
            return len(encode(list(messages)))
        counted = "tokenizer"
    else:
        count, counted = estimate_tokens, "estimate"
    return PromptBudget(window=size, reply_tokens=max(1, min(int(reply_tokens), size // 4)), count=count,
                        counted=counted)
