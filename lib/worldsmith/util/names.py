"""One rule for every name that becomes a folder: datasets, worldbooks, runs of every kind, sessions, models.

A name is 1-120 letters, digits, '.', '_' or '-', starting with a letter or digit, matched whole (a trailing
newline is not a name: `$` would have let `abc\\n` through). It can hold no path separator and cannot be `.`
or `..`, so a name never leaves the folder it is made in.
"""

from __future__ import annotations

import re

from worldsmith.util.errors import BadInputError

__all__ = ["InvalidName", "MAX_NAME", "check_name", "typed_name"]

MAX_NAME = 120
_NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME - 1}}}")


class InvalidName(BadInputError):
    """A name that cannot name a folder here; the message says what is allowed."""


def check_name(name: object, kind: str = "name") -> str:
    """`name` when it is a valid name (see module doc), else `InvalidName` naming the `kind` of thing."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise InvalidName(f"{kind} name {name!r}: use 1-{MAX_NAME} letters, digits, '.', '_' or '-', "
                          "starting with a letter or digit")
    return name


def typed_name(name: object, kind: str, error: type[Exception] = ValueError) -> str:
    """A name as a person typed it (surrounding spaces trimmed) by `check_name`; else `error` says what is allowed."""
    try:
        return check_name(name.strip() if isinstance(name, str) else name, kind)
    except InvalidName as invalid:
        raise error(str(invalid)) from None
