"""Plugin modules named in an environment variable, and installed packages' entry points: how a researcher's own
environments, importers, world models, metrics, sources and pages reach the CLI, the workbench and worker processes
without editing the library (`util.registry.Registry` loads both)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
from collections.abc import Iterator

__all__ = ["import_plugins", "iter_entry_points"]

_LOADED: set[str] = set()


def import_plugins(variable: str) -> None:
    """Import, once per process, the modules named (comma-separated) in `$variable`; they register on import."""
    if variable in _LOADED:
        return
    _LOADED.add(variable)
    for module in filter(None, (m.strip() for m in os.environ.get(variable, "").split(","))):
        try:
            importlib.import_module(module)
        except ImportError as error:
            raise ImportError(f"${variable} names {module!r}, which cannot be imported: {error}") from error


def iter_entry_points(group: str) -> Iterator[tuple[importlib.metadata.EntryPoint, object]]:
    """Each installed entry point of `group` with what it loads to, or the exception that loading raised (a broken
    plug-in is the caller's to report; it must not stop the others)."""
    for entry_point in importlib.metadata.entry_points(group=group):
        try:
            loaded: object = entry_point.load()
        except Exception as error:  # noqa: BLE001  (any failure of a third-party import is reported, not raised)
            loaded = error
        yield entry_point, loaded
