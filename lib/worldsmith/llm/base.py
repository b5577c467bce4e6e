"""The one interface every model backend speaks: chat messages in, completions with usage out.

Worldbook construction, the world-model harness, the prompting baselines and EnvACE all call
models through `LLM.chat` / `LLM.chat_many`, so a backend (vLLM in-process, an OpenAI-compatible
server, local transformers, the tiny default model) can be swapped by changing a spec string.
Every `Completion` carries its usage, latency and cost so runs can be compared and audited.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from worldsmith.util.errors import BadInputError, UnavailableError

__all__ = [
    "LLM",
    "BackendUnavailableError",
    "Completion",
    "ContextOverflowError",
    "GenerationParams",
    "LLMBase",
    "LLMError",
    "Message",
    "RefusalError",
    "StructuredOutputError",
    "TransientLLMError",
    "check_messages",
]


class Message(TypedDict, total=False):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    name: str


class LLMError(RuntimeError):
    """A model call failed."""


class BackendUnavailableError(UnavailableError, LLMError):
    """The backend cannot run here (package missing, model path absent, server unreachable)."""


class TransientLLMError(LLMError):
    """Worth retrying: rate limit, timeout, server overloaded."""


class ContextOverflowError(LLMError):
    """The prompt (plus max_tokens) does not fit the model's context window."""


class RefusalError(LLMError):
    """The model (or the provider's filter) refused to answer."""


class StructuredOutputError(LLMError):
    """The model's output could not be made to match the requested JSON schema."""

    def __init__(self, message: str, *, last_output: str = "", errors: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.last_output = last_output
        self.errors = list(errors)


@dataclass(frozen=True)
class GenerationParams:
    """Sampling parameters; part of the cache key, so every field must be JSON-serialisable."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    stop: tuple[str, ...] = ()
    seed: int | None = None
    n: int = 1
    json_schema: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise BadInputError(f"max_tokens must be at least 1, not {self.max_tokens}")
        if self.n < 1:
            raise BadInputError(f"n must be at least 1, not {self.n}")
        if not 0.0 <= self.temperature <= 5.0:
            raise BadInputError(f"temperature must be within [0, 5], not {self.temperature}")
        if not 0.0 < self.top_p <= 1.0:
            raise BadInputError(f"top_p must be within (0, 1], not {self.top_p}")
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))

    @property
    def greedy(self) -> bool:
        return self.temperature == 0.0

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["stop"] = list(self.stop)
        return out


@dataclass
class Completion:
    """One generated answer and what it cost.

    With `n > 1` the prompt's tokens and cost are counted once, on the first choice (sums over the
    choices equal what was billed); a backend that only knows the request's total completion tokens
    splits them and marks `extra["completion_tokens_estimated"]`.
    """

    text: str
    finish_reason: str = "stop"  # "stop" | "length" | ...
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens served from a prefix / KV cache
    latency_s: float = 0.0
    cost_usd: float = 0.0
    model: str = ""
    backend: str = ""
    cached: bool = False  # served from worldsmith's response cache: no model call was made
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> Completion:
        known = {key: value[key] for key in cls.__dataclass_fields__ if key in value}
        return cls(**known)


def check_messages(messages: Sequence[Message]) -> list[Message]:
    """Validate a message list (roles, text content) and return it as a list of plain dicts."""
    if not messages:
        raise ValueError("messages must not be empty")
    out: list[Message] = []
    for position, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"message {position} must be a dict with 'role' and 'content', not {type(message).__name__}")
        role, content = message.get("role"), message.get("content")
        if role not in ("system", "user", "assistant", "tool"):
            raise ValueError(f"message {position}: role must be system, user, assistant or tool, not {role!r}")
        if not isinstance(content, str):
            raise ValueError(f"message {position}: content must be text, not {type(content).__name__}")
        out.append(dict(message))  # type: ignore[arg-type]
    return out


@runtime_checkable
class LLM(Protocol):
    """A chat model. `spec` names it (`tiny:PATH`, `hf:PATH`, `vllm:PATH`, `openai:MODEL@URL`)."""

    spec: str

    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
        n: int = 1,
        json_schema: dict[str, Any] | None = None,
    ) -> list[Completion]:
        """`n` completions of one conversation."""
        ...

    def chat_many(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        top_p: float = 1.0,
        stop: Sequence[str] = (),
        seed: int | None = None,
        n: int = 1,
        json_schema: dict[str, Any] | None = None,
    ) -> list[list[Completion]]:
        """Completions for many conversations, batched by the backend (one list per conversation)."""
        ...

    def close(self) -> None:
        ...


class LLMBase:
    """Shared plumbing for backends: parameter checking; subclasses implement `generate`.

    `generate(conversations, params)` receives validated messages and returns one list of
    `params.n` completions per conversation, in order.
    """

    spec: str = ""
    backend: str = ""
    model: str = ""

    def generate(self, conversations: list[list[Message]], params: GenerationParams) -> list[list[Completion]]:
        raise NotImplementedError

    def chat(self, messages: Sequence[Message], **params: Any) -> list[Completion]:
        return self.chat_many([messages], **params)[0]

    def chat_many(self, conversations: Sequence[Sequence[Message]], **params: Any) -> list[list[Completion]]:
        checked = [check_messages(messages) for messages in conversations]
        if not checked:
            return []
        return self.generate(checked, GenerationParams(**params))

    def close(self) -> None:
        return None

    def __enter__(self) -> LLMBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.spec}>"
