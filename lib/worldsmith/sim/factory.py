"""The built-in world models, registered by name (`sim.registry`) so every front end offers the same ones.

Canonical names, with the deprecated aliases that still resolve to them:

    harness              the full harness, no model
    harness-no-book      ablation without worldbook knowledge (was `harness-schema`, `harness_schema_only`)
    harness-no-state     ablation without persistent state
    harness-single-shot  ablation without the tool loop
    harness-no-fallback  ablation without memory or nearest-evidence fallbacks
    harness+llm, ...     each harness kind above with a model's tool loop where rules end (`<kind>+llm`)
    nearest              nearest evidence (was `nearest_evidence`)
    direct               a model prompted with the history
    rag                  a model with retrieved evidence (was `trace_rag`)
    worldbook-prompt     a model with the rendered worldbook (was `book`, `worldbook_prompting`)

A harness kind is registered twice, without and with a model: a method is what it is named, so `harness` never
gets a model (not even in a run whose `--llm` is there for `direct`) and `harness+llm` always has one.
"""

from __future__ import annotations

from typing import Any

from worldsmith.llm.base import LLM
from worldsmith.sim.base import WorldModel
from worldsmith.sim.baselines import DirectPrompting, NearestEvidence, TraceRAG, WorldbookPrompting
from worldsmith.sim.harness import Harness, HarnessConfig
from worldsmith.sim.registry import make_world_model, world_model
from worldsmith.worldbook.model import Worldbook

__all__ = ["DEFAULT_WORLD_MODEL", "WITH_MODEL", "make_world_model"]

DEFAULT_WORLD_MODEL = "harness"


def _harness(ablation: dict[str, Any]) -> Any:
    def build(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
        fields = set(HarnessConfig.__dataclass_fields__)
        config = HarnessConfig(**{**{k: v for k, v in options.items() if k in fields}, **ablation})
        return Harness(book, llm=llm, config=config)

    return build


WITH_MODEL = "+llm"  # the suffix of a harness kind that runs a model's tool loop where rules end
_HARNESS_KINDS: tuple[tuple[str, dict[str, Any], str, tuple[str, ...]], ...] = (
    ("harness", {}, "the world-model harness: rules over tracked state, then episode memory and nearest evidence",
     ()),
    ("harness-no-book", {"knowledge": False},
     "ablation: the harness without worldbook knowledge (schema and state tracking only)",
     ("harness-schema", "harness_schema_only")),
    ("harness-no-state", {"persistent_state": False},
     "ablation: the harness with no persistent state (each step starts empty)", ()),
    ("harness-single-shot", {"max_tool_steps": 0},
     "ablation: the harness whose model submits at once instead of using tools", ()),
    ("harness-no-fallback", {"fallback": False},
     "ablation: the harness without memory or nearest-evidence fallbacks", ()),
)
for _name, _ablation, _description, _aliases in _HARNESS_KINDS:
    world_model(_name, description=f"{_description} (no model)", aliases=_aliases)(_harness(_ablation))
for _name, _ablation, _description, _aliases in _HARNESS_KINDS:
    world_model(f"{_name}{WITH_MODEL}", llm="required",
                description=f"{_description}, with a model's tool loop where rules end")(_harness(_ablation))


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
