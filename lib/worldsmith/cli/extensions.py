"""Every extension point in one table: the registries of what a user adds (environments, trace importers and
exporters, LLM backends, world models, metrics, answer sources), with how a plug-in reaches each, what is
registered, and which plug-ins failed to load (for metrics, also which registered metric breaks an edge-case
promise of `evals.metric_checks`: checked here, when listed, never at import). What `worldsmith plugins` prints and the workbench lists (the
workbench adds its own pages, `workbench.common.pages.PAGES`). In the CLI layer: the one that sees every registry.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import worldsmith.envs  # noqa: F401  (the built-in environments register when the package is imported)
from worldsmith.envs.registry import ENVS
from worldsmith.evals.metric_checks import registered_metric_problems
from worldsmith.evals.metrics import METRIC_REGISTRY
from worldsmith.llm.registry import BACKENDS
from worldsmith.sim.registry import WORLD_MODELS
from worldsmith.sim.sources.registry import ANSWER_SOURCES
from worldsmith.traces.exporters import EXPORTERS
from worldsmith.traces.importers import IMPORTERS
from worldsmith.util.registry import Registry

__all__ = ["describe", "extension_points"]


def extension_points() -> dict[str, Registry[Any]]:
    """The registries by the one name each kind goes by."""
    return {"env": ENVS, "importer": IMPORTERS, "exporter": EXPORTERS, "llm_backend": BACKENDS,
            "world_model": WORLD_MODELS, "metric": METRIC_REGISTRY, "answer_source": ANSWER_SOURCES}


def describe(registry: Registry[Any]) -> dict[str, Any]:
    """One registry as JSON: its names (registration order), how plug-ins reach it, and failed plug-ins (the
    metrics': also `edge_failures`, each registered metric that breaks an edge-case promise and how)."""
    names = registry.names()  # loads the built-ins and plug-ins first
    entry: dict[str, Any] = {"kind": registry.kind, "names": names, "entry_point_group": registry.entry_point_group,
                             "plugins_variable": registry.plugins_variable,
                             "failures": [asdict(f) for f in registry.failures]}
    if registry is METRIC_REGISTRY:
        entry["edge_failures"] = [{"name": name, "problems": problems}
                                  for name, problems in registered_metric_problems().items()]
    return entry
