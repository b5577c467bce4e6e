"""A world-model plugin as a researcher would write one: imported through $WORLDSMITH_WORLD_MODEL_PLUGINS."""

from __future__ import annotations

from typing import Any

from worldsmith.llm.base import LLM
from worldsmith.sim import NearestEvidence, WorldModel, world_model
from worldsmith.worldbook import Worldbook


@world_model("plugin-from-env", description="nearest evidence, registered by a plugin module")
def build(book: Worldbook, *, llm: LLM | None = None, **options: Any) -> WorldModel:
    return NearestEvidence(book, **options)
