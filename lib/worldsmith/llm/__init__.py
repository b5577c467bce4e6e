"""Model backends behind one protocol (`LLM`), built from spec strings.

    from worldsmith.llm import make_llm
    llm = make_llm("tiny:data_samples/models/tiny")
    [completion] = llm.chat([{"role": "user", "content": "look"}], max_tokens=32)
    print(completion.text, completion.prompt_tokens, completion.latency_s)
"""

from worldsmith.llm.base import (
    LLM,
    BackendUnavailableError,
    Completion,
    ContextOverflowError,
    GenerationParams,
    LLMBase,
    LLMError,
    Message,
    RefusalError,
    StructuredOutputError,
    TransientLLMError,
    check_messages,
)
from worldsmith.llm.spec import BACKENDS, ModelSpec, load_config, make_llm, parse_spec

__all__ = [
    "BACKENDS",
    "LLM",
    "BackendUnavailableError",
    "Completion",
    "ContextOverflowError",
    "GenerationParams",
    "LLMBase",
    "LLMError",
    "Message",
    "ModelSpec",
    "RefusalError",
    "StructuredOutputError",
    "TransientLLMError",
    "check_messages",
    "load_config",
    "make_llm",
    "parse_spec",
]
