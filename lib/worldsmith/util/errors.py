"""One root for the errors a user can cause, so a caller (the CLI, the workbench) can tell bad input from a bug.

Every expected failure is a `WorldsmithError`: the CLI prints it as one line (or a JSON object with
`--json`) and exits with the kind's code; anything else is a bug and crashes with a traceback (exit 1).
The kinds keep the builtin base a caller caught before (`BadInputError` is a `ValueError`,
`NotFoundError` a `LookupError`), so `except ValueError` around library calls still works.

Exit codes of the `worldsmith` command:

    0    success
    1    a failure with no more specific kind (`WorldsmithError`, the CLI's `CommandError`, rejects under
         --strict), or an unexpected crash (a bug: a traceback on stderr)
    2    usage: a bad command line (argparse)
    3    bad input: a file, field, argument or name that cannot be used (`BadInputError`)
    4    not found: a dataset, worldbook, version, episode, file ... that does not exist (`NotFoundError`)
    5    conflict: the thing exists in another shape (a run of another config, a patch on a moved base)
    6    busy: someone else holds it now (a build of that book running, a lock held); try again later
    7    unavailable: an optional package, backend, program or environment is not installed here
    130  interrupted (Ctrl-C)
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator

__all__ = ["BadInputError", "BusyError", "ConflictError", "EXIT_CODES", "MissingFileError", "NotFoundError",
           "UnavailableError", "WorldsmithError", "user_path", "user_path_error"]


class WorldsmithError(Exception):
    """An expected failure a user can act on; `where` (a file, file:line, field or member) leads the message."""

    exit_code: int = 1  # the kind's code (see the table above); a subclass may set it per instance
    kind: str = "error"

    def __init__(self, *args: object, where: str | None = None) -> None:
        if where:
            args = (f"{where}: {args[0]}", *args[1:]) if args else (where,)
        super().__init__(*args)
        self.where = where

    __str__ = Exception.__str__  # the message as given, also for a kind that is a `KeyError` (no quotes added)

    def to_json(self) -> dict[str, object]:
        """The CLI's `--json` error object: the one-line message, the kind and where."""
        return {"error": str(self), "kind": self.kind, "where": self.where}


class BadInputError(WorldsmithError, ValueError):
    """A file, field, argument, name or id that cannot be used as given; the message says what is allowed."""

    exit_code = 3
    kind = "bad_input"


class NotFoundError(WorldsmithError, LookupError):
    """The thing named (a dataset, worldbook, version, episode, file) does not exist."""

    exit_code = 4
    kind = "not_found"


class MissingFileError(NotFoundError, FileNotFoundError):
    """A file or folder the user named does not exist; also a `FileNotFoundError`, as such callers caught."""


class ConflictError(WorldsmithError):
    """The thing exists, but in a shape that conflicts with the request (another config, a moved base)."""

    exit_code = 5
    kind = "conflict"


class BusyError(WorldsmithError):
    """Someone else is working on it now (a running build, a held lock): try again later."""

    exit_code = 6
    kind = "busy"


class UnavailableError(WorldsmithError):
    """An optional package, backend, program or environment is not installed or cannot start here."""

    exit_code = 7
    kind = "unavailable"


EXIT_CODES: dict[str, int] = {cls.kind: cls.exit_code for cls in (
    WorldsmithError, BadInputError, NotFoundError, ConflictError, BusyError, UnavailableError)}


def user_path_error(path: str | os.PathLike[str], error: OSError, what: str = "") -> WorldsmithError:
    """The `WorldsmithError` for an `OSError` on a path the user gave (raise it `from error`): a missing path is
    `NotFoundError`, anything else (permission denied, a folder where a file was expected) `BadInputError`;
    the message names the path. `what` says what the path was for ("trace file", "--tasks-file")."""
    reason = error.strerror or str(error)
    where = f"{what} {os.fspath(path)}" if what else os.fspath(path)
    if isinstance(error, FileNotFoundError) or error.errno == errno.ENOENT:
        return NotFoundError("no such file or folder", where=where)
    return BadInputError(reason[:1].lower() + reason[1:], where=where)


@contextlib.contextmanager
def user_path(path: str | os.PathLike[str], what: str = "") -> Iterator[None]:
    """Around the one call that reads or writes a path the user gave: its `OSError` becomes `user_path_error`
    (keep the block to that call, so that an unrelated `OSError` is not blamed on the path)."""
    try:
        yield
    except OSError as error:
        raise user_path_error(path, error, what) from error
