"""Small shared helpers (atomic file writes)."""

from worldsmith.util.atomic import atomic_write, atomic_write_bytes, atomic_write_json

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json"]
