"""Small shared helpers (atomic file writes, staging folders, the code fingerprint, process liveness)."""

from worldsmith.util.atomic import atomic_write, atomic_write_bytes, atomic_write_json
from worldsmith.util.code_version import code_version
from worldsmith.util.processes import process_alive
from worldsmith.util.staging import make_staging, sweep_stale

__all__ = ["atomic_write", "atomic_write_bytes", "atomic_write_json", "code_version", "make_staging",
           "process_alive", "sweep_stale"]
