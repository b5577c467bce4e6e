"""The harness's answer sources: one module per source behind one protocol (`sources.base`), one registry.

Built in, in the order they are asked: `rules` (the fast path), `entities`, `fields`, `places`, `aligned`,
`shell`, `inventory`, `scope`, `memory` (episode memory), the hooks `view_edits` and `suffixes`, `model` (the
agent route) and `nearest` (nearest evidence, the fallback). Adding a source is one new file: an
`AnswerSource` and an `@answer_source(...)` registration, imported by a plugin module named in
$WORLDSMITH_SOURCE_PLUGINS (or by the caller before the harness is built).
"""

import importlib

from worldsmith.sim.sources.base import Answer, AnswerSource, Proposal, SourceContext, SourceSpec, Step, TrackerSource
from worldsmith.sim.sources.registry import (
    SOURCE_PLUGINS_VARIABLE,
    answer_source,
    answers,
    build_sources,
    register_source,
    routed_answers,
    source_specs,
    unregister_source,
)

__all__ = [
    "SOURCE_PLUGINS_VARIABLE",
    "Answer",
    "AnswerSource",
    "Proposal",
    "SourceContext",
    "SourceSpec",
    "Step",
    "TrackerSource",
    "answer_source",
    "answers",
    "build_sources",
    "register_source",
    "routed_answers",
    "source_specs",
    "unregister_source",
]

# Each built-in module registers its source on import; this order is the order sources are asked (a plugin's
# source comes after them).
BUILTIN_SOURCES = ("rules", "entities", "fields", "places", "aligned", "shell", "inventory", "scope", "memory",
                   "views", "suffixes", "model", "nearest")
for _module in BUILTIN_SOURCES:
    importlib.import_module(f"{__name__}.{_module}")
