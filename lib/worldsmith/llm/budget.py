"""How many prompt tokens a model takes: its context window and a counter for a conversation.

Prompt builders (the model baselines in `sim.baselines`) fit their conversation to this budget
instead of sending one the backend refuses with `ContextOverflowError`:

    budget = prompt_budget(llm, reply_tokens=256)
    if budget is not None and budget.count(messages) > budget.limit: ...cut the oldest history...

When the system prompt and the tool schemas a log declares do not fit, `PromptPreamble` summarises them
deterministically before any history is cut, one step at a time (`PREAMBLE_STEPS`): tool schemas to
`name(param: type, ...)` and the first sentence of their description, then to names only; a long system prompt
to its first paragraph and its headings (each with its first sentence), then to its opening sentences.

The window is read from the backend (`context_window` of the `hf`/`tiny` backends, vLLM's
`max_model_len`) through wrappers such as `TrackedLLM`, or given by the caller for a backend that
cannot say (an OpenAI-compatible server). Tokens are counted with the backend's own chat template
and tokenizer when it has one (`encode`), else estimated from the characters.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from worldsmith.llm.base import Message
from worldsmith.util.errors import BadInputError

__all__ = ["PREAMBLE_STEPS", "SYSTEM_LEVELS", "TOOL_LEVELS", "PromptBudget", "PromptPreamble", "backend_of",
           "context_window", "estimate_tokens", "prompt_budget", "summarize_system", "summarize_tools"]

TOOL_LEVELS = ("full", "brief", "names", "none")  # how much of each tool schema a prompt shows
SYSTEM_LEVELS = ("full", "outline", "first", "none")  # how much of a system prompt a prompt shows
# (system level, tools level), least summarised first: the tools shrink before the instructions do
PREAMBLE_STEPS: tuple[tuple[str, str], ...] = (
    ("full", "full"), ("full", "brief"), ("outline", "brief"), ("outline", "names"), ("first", "names"),
    ("none", "none"))
FIRST_CHARS = 300  # the 'first' system level: the opening sentences up to this many characters

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


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_HEADING = re.compile(r"^(#{1,6}\s+\S.*|[A-Z][^.!?]{0,60}:|[A-Z0-9][A-Z0-9 /&-]{2,60})$")


def _sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE.split(" ".join(text.split())) if part.strip()]


def _paragraphs(text: str) -> list[str]:
    return [block.strip() for block in re.split(r"\n\s*\n", text.strip()) if block.strip()]


def _opening(text: str, limit: int) -> str:
    """Whole sentences from the start of `text` within `limit` characters (at least the first, clipped)."""
    out = ""
    for sentence in _sentences(text):
        joined = f"{out} {sentence}".strip()
        if len(joined) > limit:
            break
        out = joined
    if not out:
        first = " ".join(text.split())
        out = first if len(first) <= limit else first[: max(limit - 1, 0)].rstrip() + "…"
    return out


def _first_sentence(text: str) -> str:
    return _opening(_sentences(text)[0] if _sentences(text) else text, FIRST_CHARS)


def summarize_system(text: str, level: str) -> str:
    """A system prompt at `level` (`SYSTEM_LEVELS`): 'full'; 'outline' = its first paragraph, then each heading
    with the first sentence under it, saying how many paragraphs went; 'first' = its opening sentences (at most
    `FIRST_CHARS` characters); 'none' = ""."""
    if level not in SYSTEM_LEVELS:
        raise BadInputError(f"system prompt level is one of {', '.join(SYSTEM_LEVELS)}, not {level!r}")
    text = text.strip()
    if level == "none" or not text:
        return ""
    if level == "full":
        return text
    if level == "first":
        return _opening(_paragraphs(text)[0], FIRST_CHARS)
    blocks = _paragraphs(text)
    kept, left = [blocks[0]], 0
    pending: str | None = None  # a heading alone in its block: its first sentence is in the next block
    for block in blocks[1:]:
        lines = block.splitlines()
        if pending is not None:
            kept.append(f"{pending}\n{_first_sentence(block)}")
            pending = None
            continue
        if _HEADING.match(lines[0].strip()):
            rest = " ".join(lines[1:]).strip()
            if rest:
                kept.append(f"{lines[0].strip()}\n{_first_sentence(rest)}")
            else:
                pending = lines[0].strip()
            continue
        left += 1
    if pending is not None:
        kept.append(pending)
    if left:
        kept.append(f"({left} more paragraph{'s' if left != 1 else ''} of the system prompt left out)")
    return "\n\n".join(kept)


def _function(schema: Mapping[str, Any]) -> Mapping[str, Any]:
    """The function part of an OpenAI tool schema (`{"type": "function", "function": {...}}`) or a bare one."""
    inner = schema.get("function")
    return inner if isinstance(inner, Mapping) else schema


def _type(spec: Any) -> str:
    if not isinstance(spec, Mapping):
        return "any"
    kind = spec.get("type")
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if kind == "array" and isinstance(spec.get("items"), Mapping):
        return f"array[{_type(spec['items'])}]"
    if isinstance(kind, str):
        return kind
    if "enum" in spec:
        return "enum"
    return "any"


def _signature(function: Mapping[str, Any]) -> str:
    parameters = function.get("parameters")
    properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
    required = parameters.get("required") if isinstance(parameters, Mapping) else None
    required = set(required) if isinstance(required, list) else set()
    arguments = [f"{name}{'' if name in required else '?'}: {_type(spec)}"
                 for name, spec in (properties.items() if isinstance(properties, Mapping) else [])]
    return f"{function.get('name', '?')}({', '.join(arguments)})"


def _descriptions(functions: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each tool's first sentence that not every tool shares (logs often open each description alike)."""
    sentences = [_sentences(str(f.get("description") or "")) for f in functions]
    shared = set.intersection(*(set(s) for s in sentences)) if len(sentences) > 1 else set()
    return [next((s for s in own if s not in shared), own[0] if own else "") for own in sentences]


def summarize_tools(tools: Sequence[Mapping[str, Any]], level: str) -> str:
    """Tool schemas at `level` (`TOOL_LEVELS`): 'full' = one compact JSON schema a line; 'brief' = `name(param:
    type, optional?: type)` and the first sentence of the description that not every tool shares; 'names' = the
    names, comma-separated; 'none' = ""."""
    if level not in TOOL_LEVELS:
        raise BadInputError(f"tool schema level is one of {', '.join(TOOL_LEVELS)}, not {level!r}")
    functions = [_function(tool) for tool in tools if isinstance(tool, Mapping)]
    if level == "none" or not functions:
        return ""
    if level == "names":
        return ", ".join(str(f.get("name", "?")) for f in functions)
    if level == "full":
        return "\n".join(orjson.dumps({k: f[k] for k in ("name", "description", "parameters") if k in f},
                                       default=str).decode() for f in functions)
    return "\n".join(f"- {_signature(f)}" + (f": {text}" if text else "")
                     for f, text in zip(functions, _descriptions(functions), strict=True))


@dataclass(frozen=True)
class PromptPreamble:
    """The system prompt and tool schemas a log declares, rendered into a prompt at a summary level."""

    system_prompt: str = ""
    tools: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.system_prompt.strip() and not self.tools

    def render(self, system_level: str = "full", tools_level: str = "full") -> str:
        """The preamble's prompt text ("" when there is nothing to show at these levels)."""
        parts = []
        system = summarize_system(self.system_prompt, system_level)
        if system:
            note = "" if system == self.system_prompt.strip() else ", summarised"
            parts.append(f"The agent's instructions (its system prompt{note}):\n{system}")
        tools = summarize_tools(self.tools, tools_level)
        if tools:
            note = {"full": "their schemas", "brief": "summarised", "names": "names only"}[tools_level]
            parts.append(f"The tools the agent can call ({note}):\n{tools}")
        return "\n\n".join(parts)

    def steps(self) -> list[tuple[str, str]]:
        """The `PREAMBLE_STEPS` that change what this preamble shows, least summarised first (duplicates gone)."""
        seen: dict[str, tuple[str, str]] = {}
        for step in PREAMBLE_STEPS:
            seen.setdefault(self.render(*step), step)
        return list(seen.values())
