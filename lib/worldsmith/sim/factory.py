"""The built-in world models, registered by name (`sim.registry`) so every front end offers the same ones.

Canonical names, with the deprecated aliases that still resolve to them:

    harness              the full harness
    harness-no-book      ablation without worldbook knowledge (was `harness-schema`, `harness_schema_only`)
    harness-no-state     ablation without persistent state
    harness-single-shot  ablation without the tool loop
    harness-no-fallback  ablation without memory or nearest-evidence fallbacks
    nearest              nearest evidence (was `nearest_evidence`)
    direct               a model prompted with the history
    rag                  a model with retrieved evidence (was `trace_rag`)
    worldbook-prompt     a model with the rendered worldbook (was `book`, `worldbook_prompting`)
"""

from __future__ import annotations

from typing import Any

from worldsmith.llm.base import LLM
from worldsmith.sim.base import WorldModel
from worldsmith.sim.baselines import DirectPrompting, NearestEvidence, TraceRAG, WorldbookPrompting
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.registry import make_world_model, world_model
from worldsmith.worldbook.model import Worldbook

__all__ = ["DEFAULT_WORLD_MODEL", "make_world_model"]

DEFAULT_WORLD_MODEL = "harness"


def _harness(ablation: dict[str, Any]) -> Any:
    def build(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
        fields = set(HarnessConfig.__dataclass_fields__)
        config = HarnessConfig(**{**{k: v for k, v in options.items() if k in fields}, **ablation})
        return Harness(book, llm=llm, config=config)

    return build


world_model("harness", llm="optional",
            description="the world-model harness: rules over tracked state, a model's tool loop (if given) where "
                        "rules end, else episode memory and nearest evidence")(_harness({}))
world_model("harness-no-book", llm="optional", aliases=("harness-schema", "harness_schema_only"),
            description="ablation: the harness without worldbook knowledge (schema and state tracking only)",
            )(_harness({"knowledge": False}))
world_model("harness-no-state", llm="optional",
            description="ablation: the harness with no persistent state (each step starts empty)",
            )(_harness({"persistent_state": False}))
world_model("harness-single-shot", llm="optional",
            description="ablation: the harness whose model submits at once instead of using tools",
            )(_harness({"max_tool_steps": 0}))
world_model("harness-no-fallback", llm="optional",
            description="ablation: the harness without memory or nearest-evidence fallbacks",
            )(_harness({"fallback": False}))


@world_model("nearest", aliases=("nearest_evidence",),
             description="nearest evidence, adapted to the arguments (no model)")
def _nearest(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    return NearestEvidence(book, **options)


@world_model("direct", llm="required", description="a model prompted with the history")
def _direct(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    assert llm is not None  # the registry refuses a missing model first
    return DirectPrompting(llm, evidence=book, **options)


@world_model("rag", llm="required", aliases=("trace_rag",),
             description="a model prompted with the history and the top-k retrieved evidence transitions")
def _rag(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    assert llm is not None
    return TraceRAG(llm, book, **options)


@world_model("worldbook-prompt", llm="required", aliases=("book", "worldbook_prompting"),
             description="a model prompted with the history and the rendered worldbook")
def _worldbook_prompt(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    assert llm is not None
    return WorldbookPrompting(llm, book, **options)
