"""One fingerprint of the code that makes results: every module of the `worldsmith` package.

Evaluation runs refuse to resume records made by other code, and the builder never reuses a cached
stage made by other code. Both once hashed hand-picked folders, and a change elsewhere (the
rule engine, the build stages, a simulator tracker the route stage runs) slipped through. Hashing
the whole package is cheap (a few hundred small files, once per process) and cannot go stale.
"""

from __future__ import annotations

import hashlib
from functools import cache
from pathlib import Path

__all__ = ["PACKAGE_ROOT", "code_version"]

PACKAGE_ROOT = Path(__file__).resolve().parents[1]


def code_version(root: Path | None = None) -> str:
    """12 hex digits over every `.py` file under `root` (the installed `worldsmith` package by default, hashed
    once per process): each file's path relative to `root` and its bytes, in path order."""
    return _installed() if root is None else _hash(Path(root).resolve())


@cache
def _installed() -> str:
    return _hash(PACKAGE_ROOT)


def _hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]
