"""Small shared helpers (atomic file writes, the code fingerprint)."""

from worldsmith.util.atomic import atomic_write, atomic_write_bytes, atomic_write_json
from worldsmith.util.code_version import code_version

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json", "code_version"]
