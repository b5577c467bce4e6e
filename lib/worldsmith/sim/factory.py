"""World models by name, so the CLI and the workbench offer the same choices with the same defaults."""

from __future__ import annotations

from typing import Any

from worldsmith.llm.base import LLM
from worldsmith.sim.base import WorldModel
from worldsmith.sim.baselines import DirectPrompting, NearestEvidence, TraceRAG, WorldbookPrompting
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.worldbook.model import Worldbook

__all__ = ["DEFAULT_WORLD_MODEL", "MODEL_WORLD_MODELS", "OPTIONAL_MODEL_WORLD_MODELS", "WORLD_MODELS",
           "make_world_model"]

# name -> what it is (the names `worldsmith simulate --model` takes)
WORLD_MODELS = {
    "harness": "the world-model harness: rules over tracked state, a model's tool loop (if given) where rules end, "
               "else episode memory and nearest evidence",
    "harness-schema": "the harness without worldbook knowledge (schema and state tracking only)",
    "harness-no-state": "ablation: the harness with no persistent state (each step starts empty)",
    "harness-single-shot": "ablation: the harness whose model submits at once instead of using tools",
    "harness-no-fallback": "ablation: the harness without memory or nearest-evidence fallbacks",
    "nearest": "nearest evidence, adapted to the arguments (no model)",
    "direct": "a model prompted with the history",
    "rag": "a model prompted with the history and the top-k retrieved evidence transitions",
    "book": "a model prompted with the history and the rendered worldbook",
}
MODEL_WORLD_MODELS = frozenset({"direct", "rag", "book"})  # these need an LLM
OPTIONAL_MODEL_WORLD_MODELS = frozenset({"harness", "harness-schema", "harness-no-state", "harness-single-shot",
                                         "harness-no-fallback"})  # these use a model when given one
_ABLATIONS: dict[str, dict[str, Any]] = {
    "harness": {}, "harness-schema": {"knowledge": False}, "harness-no-state": {"persistent_state": False},
    "harness-single-shot": {"max_tool_steps": 0}, "harness-no-fallback": {"fallback": False},
}
DEFAULT_WORLD_MODEL = "harness"


def make_world_model(kind: str, book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    """The world model `kind` (a key of `WORLD_MODELS`) on `book`; the model baselines need `llm`.

    Options go to the baseline (`max_tokens`, `history_chars`, `k`, ...); the model baselines fall
    back to the book's evidence when the model's reply is unusable.
    """
    if kind not in WORLD_MODELS:
        raise ValueError(f"unknown world model {kind!r} (choose from {', '.join(WORLD_MODELS)})")
    if kind in OPTIONAL_MODEL_WORLD_MODELS:
        fields = set(HarnessConfig.__dataclass_fields__)
        config = HarnessConfig(**{**{k: v for k, v in options.items() if k in fields}, **_ABLATIONS[kind]})
        return Harness(book, llm=llm, config=config)
    if kind == "nearest":
        return NearestEvidence(book, **options)
    if llm is None:
        raise ValueError(f"world model {kind!r} needs a model (an LLM spec)")
    if kind == "direct":
        return DirectPrompting(llm, evidence=book, **options)
    if kind == "rag":
        return TraceRAG(llm, book, **options)
    return WorldbookPrompting(llm, book, **options)
