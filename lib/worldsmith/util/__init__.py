"""Small shared helpers (atomic file writes, staging folders, names, the code fingerprint, process liveness,
user paths, the executors that run work units in this process, a process pool or Ray)."""

from worldsmith.util.atomic import atomic_write, atomic_write_bytes, atomic_write_json
from worldsmith.util.code_version import code_version
from worldsmith.util.executors import (
    LOCAL_RAY,
    Executor,
    InlineExecutor,
    ProcessExecutor,
    RayExecutor,
    UnitOutcome,
    make_executor,
    ray_session,
)
from worldsmith.util.names import InvalidName, check_name
from worldsmith.util.paths import resolve_user_path
from worldsmith.util.processes import process_alive
from worldsmith.util.staging import make_staging, sweep_stale

__all__ = ["LOCAL_RAY", "Executor", "InlineExecutor", "InvalidName", "ProcessExecutor", "RayExecutor", "UnitOutcome",
           "atomic_write", "atomic_write_bytes", "atomic_write_json", "check_name", "code_version",
           "make_executor", "make_staging", "process_alive", "ray_session", "resolve_user_path", "sweep_stale"]
