"""Plugin modules named in an environment variable, and installed packages' entry points: how a researcher's own
environments, importers, world models, metrics, sources and pages reach the CLI, the workbench and worker processes
without editing the library (`util.registry.Registry` loads both)."""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import sys
from collections.abc import Iterator
from typing import Any

__all__ = ["import_plugins", "installed_entry_points", "iter_entry_points"]

_LOADED: set[str] = set()
# Every installed entry point, read once per `sys.path`: reading them scans every installed distribution (7-15 ms
# on a full environment), and each registry asks for its own group on a CLI start.
# (`Any`: Python 3.11 returns the deprecated `SelectableGroups`, 3.12 `EntryPoints`; both have `select`.)
_SNAPSHOT: tuple[tuple[str, ...], Any] | None = None


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


def installed_entry_points(group: str, *, fresh: bool = False) -> importlib.metadata.EntryPoints:
    """The installed entry points of `group`, from one scan per process and `sys.path` (`fresh` scans again: a
    package installed while the process runs)."""
    global _SNAPSHOT
    path = tuple(sys.path)
    snapshot = _SNAPSHOT
    if fresh or snapshot is None or snapshot[0] != path:
        snapshot = _SNAPSHOT = (path, importlib.metadata.entry_points())
    selected: importlib.metadata.EntryPoints = snapshot[1].select(group=group)
    return selected


def iter_entry_points(group: str, *, fresh: bool = False) -> Iterator[tuple[importlib.metadata.EntryPoint, object]]:
    """Each installed entry point of `group` with what it loads to, or the exception that loading raised (a broken
    plug-in is the caller's to report; it must not stop the others)."""
    for entry_point in installed_entry_points(group, fresh=fresh):
        try:
            loaded: object = entry_point.load()
        except Exception as error:  # noqa: BLE001  (any failure of a third-party import is reported, not raised)
            loaded = error
        yield entry_point, loaded
