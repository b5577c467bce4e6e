"""The harness's answer sources: one module per source behind one protocol (`sources.base`), one registry.

Built in, in the order they are asked: `rules` (the fast path), `entities`, `fields`, `places`, `aligned`,
`shell`, `inventory`, `scope`, `memory` (episode memory), the hooks `view_edits` and `suffixes`, `model` (the
agent route) and `nearest` (nearest evidence, the fallback). Adding a source is one new file: an
`AnswerSource` and an `@answer_source(...)` registration, imported by a plugin module named in
$WORLDSMITH_SOURCE_PLUGINS (or by the caller before the harness is built).
"""

from worldsmith.sim.sources import (
    aligned,  # noqa: F401
    entities,  # noqa: F401
    fields,  # noqa: F401
    inventory,  # noqa: F401
    memory,  # noqa: F401
    model,  # noqa: F401
    nearest,  # noqa: F401
    places,  # noqa: F401
    rules,  # noqa: F401  (each module registers its source on import, in this order)
    scope,  # noqa: F401
    shell,  # noqa: F401
    suffixes,  # noqa: F401
    views,  # noqa: F401
)
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
