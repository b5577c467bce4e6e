"""Hard caps on what an import may take from one file, so a hostile file costs bounded time and memory.

Every cap is a module constant with an environment override (`WORLDSMITH_IMPORT_<NAME>`, read at each import),
so a workspace with genuinely larger logs can raise one without code changes:

- `MAX_MEMBER_BYTES`: decompressed size of one archive member (an Inspect `.eval` sample or header); a larger
  sample is rejected alone, a larger header rejects the file.
- `MAX_ARCHIVE_BYTES`: decompressed size of a whole archive (the sum its directory declares).
- `MAX_MEMBERS`: members in one archive.
- `MAX_RECORD_BYTES`: one JSONL line; a longer one is skipped while streaming and rejected alone.
- `MAX_JSON_DEPTH`: nesting of one record; a deeper record is rejected alone, at import and at build alike.
- `MAX_QUARANTINE_RAW`: characters of a rejected record kept verbatim in the quarantine file.
- `MAX_PROCESS_BYTES`: the address space of an isolated import's process (`workspace.isolated_ingest`, what the
  workbench runs), so whatever a file does to the importer, the app that asked survives.

Zip members are read through Python's `zipfile`, which never inflates past the size an entry declares (a lying
entry fails its CRC check), so checking the declared sizes before reading bounds the work.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, fields

from worldsmith.util.errors import BadInputError

__all__ = [
    "ENV_PREFIX",
    "MAX_ARCHIVE_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_MEMBERS",
    "MAX_MEMBER_BYTES",
    "MAX_PROCESS_BYTES",
    "MAX_QUARANTINE_RAW",
    "MAX_RECORD_BYTES",
    "ImportLimits",
    "import_limits",
    "truncate_raw",
]

MAX_MEMBER_BYTES = 256 << 20
MAX_ARCHIVE_BYTES = 8 << 30
MAX_MEMBERS = 200_000
MAX_RECORD_BYTES = 256 << 20
MAX_JSON_DEPTH = 64
MAX_QUARANTINE_RAW = 64 << 10
MAX_PROCESS_BYTES = 3 << 30
ENV_PREFIX = "WORLDSMITH_IMPORT_"


@dataclass(frozen=True, slots=True)
class ImportLimits:
    """The caps in force for one import (see the module doc)."""

    max_member_bytes: int = MAX_MEMBER_BYTES
    max_archive_bytes: int = MAX_ARCHIVE_BYTES
    max_members: int = MAX_MEMBERS
    max_record_bytes: int = MAX_RECORD_BYTES
    max_json_depth: int = MAX_JSON_DEPTH
    max_quarantine_raw: int = MAX_QUARANTINE_RAW
    max_process_bytes: int = MAX_PROCESS_BYTES


def import_limits() -> ImportLimits:
    """The module's caps, each overridden by `WORLDSMITH_IMPORT_<NAME>` when set (a positive integer);
    a malformed override is a ValueError naming the variable."""
    values: dict[str, int] = {}
    for field in fields(ImportLimits):
        variable = ENV_PREFIX + field.name.upper()
        text = os.environ.get(variable)
        if text is None or not text.strip():
            continue
        try:
            number = int(text.strip())
        except ValueError:
            raise BadInputError(f"{variable}={text!r}: expected a positive integer") from None
        if number <= 0:
            raise BadInputError(f"{variable}={text!r}: expected a positive integer")
        values[field.name] = number
    return ImportLimits(**values)


def truncate_raw(raw: str | None, limit: int) -> tuple[str | None, int | None]:
    """`raw` cut to `limit` characters, and its full length when it was cut (else None)."""
    if raw is None or len(raw) <= limit:
        return raw, None
    return raw[:limit], len(raw)
