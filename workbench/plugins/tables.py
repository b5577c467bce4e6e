"""Rows for the Plug-ins page: one per extension point (the library's registries, then the workbench's pages)."""

from __future__ import annotations

from typing import Any

from workbench.common.pages import PAGES
from worldsmith.cli.extensions import describe, extension_points
from worldsmith.util import Registry

__all__ = ["edge_failure_rows", "extension_rows", "failure_rows"]


def _registries() -> dict[str, Registry[Any]]:
    return {**extension_points(), "page": PAGES}


def extension_rows() -> list[dict[str, Any]]:
    """One row per extension point: its name, the registered names, how a plug-in reaches it."""
    rows = []
    for name, registry in _registries().items():
        entry = describe(registry)
        rows.append({"extension point": name, "registered": len(entry["names"]), "names": ", ".join(entry["names"]),
                     "entry point group": entry["entry_point_group"] or "",
                     "variable": f"${entry['plugins_variable']}" if entry["plugins_variable"] else ""})
    return rows


def failure_rows() -> list[dict[str, str]]:
    """Plug-ins that failed to load (skipped): where they were declared and why."""
    return [{"extension point": name, "plug-in": failure.name, "target": failure.target, "error": failure.error}
            for name, registry in _registries().items() for failure in registry.failures]


def edge_failure_rows() -> list[dict[str, str]]:
    """Registered metrics that break an edge-case promise (an empty prediction scoring 1, ...): loaded, but their
    numbers would mislead."""
    return [{"metric": failing["name"], "problems": "; ".join(failing["problems"])}
            for failing in describe(extension_points()["metric"])["edge_failures"]]
