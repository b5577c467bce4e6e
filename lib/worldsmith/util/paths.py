"""Relative paths users type (a model folder, a trace file in a config) resolved one way everywhere.

The workbench page, the CLI and a background job the page starts run in different working
directories, so a path relative to "here" would name different files in each. A relative path is
taken against the workspace root; the bundled files (the source checkout, or their copy in an
installed wheel: `worldsmith._resources`) are the second place looked in, so `data_samples/...`
works from any workspace and any install. A path found in neither stays under the
workspace root, so an error names the place that was looked in. The default workspace root lives here, at the
bottom, because the model layer (the call log) and these paths need it as much as `worldsmith.workspace` does.
"""

from __future__ import annotations

import os
from pathlib import Path

from worldsmith._resources import bundle_root
from worldsmith.util.errors import user_path_error

__all__ = ["WORKSPACE_ENV_VAR", "default_workspace_root", "read_user_bytes", "read_user_text", "resolve_user_path"]

WORKSPACE_ENV_VAR = "WORLDSMITH_WORKSPACE"


def default_workspace_root() -> Path:
    """`$WORLDSMITH_WORKSPACE`, else `./workspace`."""
    return Path(os.environ.get(WORKSPACE_ENV_VAR) or "workspace")


def resolve_user_path(text: str | os.PathLike[str], workspace_root: str | os.PathLike[str] | None = None) -> Path:
    """An absolute path for `text`: as is when absolute, else under the workspace root (`$WORLDSMITH_WORKSPACE`
    when not given), else under the bundled files (`_resources.bundle_root`) when it exists only there."""
    path = Path(text).expanduser()
    if path.is_absolute():
        return path
    if workspace_root is None:
        workspace_root = default_workspace_root()
    in_workspace = Path(workspace_root).expanduser().resolve() / path
    if in_workspace.exists():
        return in_workspace
    bundled = bundle_root() / path
    return bundled if bundled.exists() else in_workspace


def read_user_bytes(path: str | os.PathLike[str], what: str = "") -> bytes:
    """The bytes of a file the user named; a missing or unreadable one is a `NotFoundError` / `BadInputError`
    naming the path (and `what` it was for, e.g. "--tasks-file"), never a bare `OSError`."""
    try:
        return Path(path).read_bytes()
    except OSError as error:
        raise user_path_error(path, error, what) from error


def read_user_text(path: str | os.PathLike[str], what: str = "") -> str:
    """The UTF-8 text of a file the user named (errors as `read_user_bytes`; bad UTF-8 is a `BadInputError`)."""
    data = read_user_bytes(path, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise user_path_error(path, OSError(0, f"not UTF-8 text (byte {error.start})"), what) from None
