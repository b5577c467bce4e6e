"""Small shared helpers (atomic file writes, staging folders, folder swaps, clipping text, names, the code
fingerprint, process liveness, user paths, the error kinds a caller catches, the one registry of everything users
add, the executors that run work units in this process, a process pool or Ray)."""

from worldsmith.util.atomic import atomic_write, atomic_write_bytes, atomic_write_json
from worldsmith.util.code_version import code_version
from worldsmith.util.dirs import publish_dir, replace_dir, staging_dir
from worldsmith.util.errors import (
    BadInputError,
    BusyError,
    ConflictError,
    MissingFileError,
    NotFoundError,
    UnavailableError,
    WorldsmithError,
    user_path,
    user_path_error,
)
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
from worldsmith.util.jobs import plain_run_name
from worldsmith.util.names import InvalidName, check_name
from worldsmith.util.paths import default_workspace_root, read_user_bytes, read_user_text, resolve_user_path
from worldsmith.util.processes import process_alive
from worldsmith.util.progress import Progress
from worldsmith.util.registry import AlreadyRegisteredError, NotRegisteredError, Registry
from worldsmith.util.staging import make_staging, sweep_stale
from worldsmith.util.text import clip

__all__ = ["LOCAL_RAY", "AlreadyRegisteredError", "BadInputError", "BusyError", "ConflictError", "Executor",
           "InlineExecutor", "InvalidName", "MissingFileError", "NotFoundError", "NotRegisteredError", "ProcessExecutor", "Progress",
           "RayExecutor", "Registry", "UnavailableError", "UnitOutcome", "WorldsmithError", "atomic_write",
           "atomic_write_bytes", "atomic_write_json", "check_name", "clip",
           "code_version", "default_workspace_root", "make_executor", "make_staging", "plain_run_name", "process_alive",
           "publish_dir", "ray_session",
           "read_user_bytes", "read_user_text",
           "replace_dir", "resolve_user_path", "staging_dir", "sweep_stale", "user_path", "user_path_error"]
