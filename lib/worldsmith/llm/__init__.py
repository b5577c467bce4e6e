"""Model backends behind one protocol (`LLM`), built from spec strings.

    from worldsmith.llm import make_llm
    llm = make_llm("tiny:data_samples/models/tiny")
    [completion] = llm.chat([{"role": "user", "content": "look"}], max_tokens=32)
    print(completion.text, completion.prompt_tokens, completion.latency_s)

Exported: the protocol and its types (`LLM`, `Message`, `Completion`, the errors), opening models by spec
(`open_llm`, `make_llm`, `parse_spec`, `configured_models`), backends (`register_backend`, `backends`), call
logging and caching, prompt budgets and structured output. Namespace: `catalog` (what the Models page and
`worldsmith llm` show: model and backend rows, one prompt sent the way every call is) and `indomain` (a
dataset's own tiny model: training it on the dataset's train split, and which model its methods use by default) and
`provenance` (`NumberProvenance`: what produced a reported number; what a model folder says it was trained on).
"""

from worldsmith.llm import catalog, indomain, provenance
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
from worldsmith.llm.budget import (
    PromptBudget,
    PromptPreamble,
    context_window,
    prompt_budget,
    summarize_system,
    summarize_tools,
)
from worldsmith.llm.cache import ResponseCache
from worldsmith.llm.calllog import CallLog, CallRecord
from worldsmith.llm.registry import BackendSpec, backend, backends, register_backend
from worldsmith.llm.spec import (
    ModelSpec,
    configured_models,
    default_model_spec,
    load_config,
    make_llm,
    parse_spec,
    resolve_spec,
)
from worldsmith.llm.structured import chat_structured, extract_json
from worldsmith.llm.tracked import TrackedLLM, new_run_id, open_llm

__all__ = [
    "LLM",
    "BackendSpec",
    "BackendUnavailableError",
    "CallLog",
    "CallRecord",
    "Completion",
    "ContextOverflowError",
    "GenerationParams",
    "LLMBase",
    "LLMError",
    "Message",
    "ModelSpec",
    "PromptBudget",
    "PromptPreamble",
    "RefusalError",
    "ResponseCache",
    "StructuredOutputError",
    "TrackedLLM",
    "TransientLLMError",
    "backend",
    "backends",
    "catalog",
    "chat_structured",
    "check_messages",
    "configured_models",
    "context_window",
    "default_model_spec",
    "extract_json",
    "indomain",
    "load_config",
    "make_llm",
    "new_run_id",
    "open_llm",
    "parse_spec",
    "prompt_budget",
    "provenance",
    "register_backend",
    "resolve_spec",
    "summarize_system",
    "summarize_tools",
]
