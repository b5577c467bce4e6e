"""Relative paths users type (a model folder, a trace file in a config) resolved one way everywhere.

The workbench page, the CLI and a background job the page starts run in different working
directories, so a path relative to "here" would name different files in each. A relative path is
taken against the workspace root; the source checkout is the second place looked in, so the
bundled `data_samples/...` works from any workspace. A path found in neither stays under the
workspace root, so an error names the place that was looked in.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["CHECKOUT", "resolve_user_path"]

CHECKOUT = Path(__file__).resolve().parents[3]  # the source checkout (data_samples/ lives there)


def resolve_user_path(text: str | os.PathLike[str], workspace_root: str | os.PathLike[str] | None = None) -> Path:
    """An absolute path for `text`: as is when absolute, else under the workspace root (`$WORLDSMITH_WORKSPACE`
    when not given), else under the source checkout when it exists only there."""
    path = Path(text).expanduser()
    if path.is_absolute():
        return path
    if workspace_root is None:
        from worldsmith.workspace import default_workspace_root

        workspace_root = default_workspace_root()
    in_workspace = Path(workspace_root).expanduser().resolve() / path
    if in_workspace.exists():
        return in_workspace
    bundled = CHECKOUT / path
    return bundled if bundled.exists() else in_workspace
