"""The harness's answer sources: one module per source behind one protocol (`sources.base`), one registry.

Built in: `rules` (the fast path), `entities`, `fields`, `places`, `aligned`, `shell`, `inventory`, `scope`,
`memory` (episode memory), the hooks `view_edits` and `suffixes`, `model` (the agent route) and `nearest`
(nearest evidence, the fallback). Adding a source is one new file holding an `AnswerSource` and its
`@answer_source(...)` registration: in this package (every module here is imported), or anywhere, named in
$WORLDSMITH_SOURCE_PLUGINS (or imported by the caller before the harness is built). Answers are preferred by
their declared rank, not by the order sources are asked in.
"""

import importlib
import pkgutil

from worldsmith.sim.sources.base import (
    Answer,
    AnswerSource,
    CandidateAnswer,
    SourceContext,
    SourceSpec,
    Step,
    TrackerSource,
)
from worldsmith.sim.sources.registry import (
    SOURCE_PLUGINS_VARIABLE,
    answer_source,
    answers,
    build_order,
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
    "CandidateAnswer",
    "SourceContext",
    "SourceSpec",
    "Step",
    "TrackerSource",
    "answer_source",
    "answers",
    "build_order",
    "build_sources",
    "register_source",
    "routed_answers",
    "source_specs",
    "unregister_source",
]

# Every module of this package but the protocol and the registry is a source that registers itself on import:
# adding one is adding its file. They are imported in name order (a module another imports registers first).
_PLUMBING = frozenset({"base", "registry"})
for _module in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in _PLUMBING):
    importlib.import_module(f"{__name__}.{_module}")
