"""Plugin modules named in an environment variable: how a researcher's own environments and world models reach
the CLI, the workbench and worker processes without editing the library."""

from __future__ import annotations

import importlib
import os

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
