"""Ingest in a child process under a memory limit, so a hostile upload can cost that process, never the caller.

The workbench imports through `ingest_isolated`: the child (`python -m worldsmith.workspace.isolated_ingest`)
reads its request as JSON on stdin, caps its own address space with `resource.setrlimit(RLIMIT_AS)` (the import
cap `MAX_PROCESS_BYTES`), runs `ingest_files`, and writes one JSON line per progress report and one with the
report's summary. When it dies instead (out of memory, a crash in a parser, a kill), the caller gets an
`IsolatedIngestError` saying how, and the child's staging folder and quarantine temp file are removed: whatever
it had staged was never committed, since a commit is the last, atomic step of an ingest.
"""

from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import orjson

from worldsmith.traces.limits import import_limits
from worldsmith.util.errors import BadInputError
from worldsmith.workspace.ingest import IngestProgress, ProgressCallback, ingest_files
from worldsmith.workspace.layout import WorkspaceLayout
from worldsmith.workspace.redaction import RedactionSettings

__all__ = ["IsolatedIngestError", "ingest_isolated"]

_STDERR_TAIL = 2000


class IsolatedIngestError(RuntimeError):
    """The import's process died before it could report; the message says how. Nothing was committed."""


def ingest_isolated(
    workspace_root: Path,
    paths: Iterable[str | Path],
    dataset: str,
    *,
    format: str | None = None,
    strict: bool = False,
    env: str | None = None,
    progress: ProgressCallback | None = None,
    memory_limit: int | None = None,
    redact: RedactionSettings | None = None,
) -> dict[str, Any]:
    """`ingest_files` in a child process limited to `memory_limit` bytes of address space (default: the import
    cap `MAX_PROCESS_BYTES`); the report's summary. ValueError for a usage error the child reports (a bad dataset
    name or format), IsolatedIngestError when the child dies."""
    limit = memory_limit if memory_limit is not None else import_limits().max_process_bytes
    request = {
        "workspace": str(Path(workspace_root).resolve()),
        "paths": [str(Path(p)) for p in paths],
        "dataset": dataset,
        "format": format,
        "strict": strict,
        "env": env,
        "memory_limit": limit,
        "redact": redact.to_json() if redact is not None else None,
    }
    with tempfile.TemporaryFile() as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "worldsmith.workspace.isolated_ingest"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=_child_env(),
        )
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write(orjson.dumps(request))
        child.stdin.close()
        outcome = _follow(child.stdout, progress)
        code = child.wait()
        if outcome is not None and outcome.get("kind") == "report":
            return dict(outcome["summary"])
        _remove_leftovers(Path(workspace_root), child.pid)
        if outcome is not None and outcome.get("kind") == "usage":
            raise BadInputError(str(outcome["error"]))
        stderr.seek(0)
        tail = stderr.read().decode("utf-8", errors="replace")[-_STDERR_TAIL:]
    raise IsolatedIngestError(_death(code, limit, outcome, tail))


def _child_env() -> dict[str, str]:
    """This process's environment, with its import path, so the child imports the same worldsmith."""
    env = dict(os.environ)
    here = [entry for entry in sys.path if entry]
    env["PYTHONPATH"] = os.pathsep.join([*here, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))])
    # Arrow's own allocators reserve large address ranges up front, which an RLIMIT_AS cap turns into failed
    # allocations of a few bytes; the system allocator reserves what it uses.
    env.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    return env


def _follow(stdout: IO[bytes], progress: ProgressCallback | None) -> dict[str, Any] | None:
    """Read the child's lines: progress goes to `progress`; the last other message is the outcome."""
    outcome: dict[str, Any] | None = None
    for line in stdout:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue  # a stray print from a library: not ours
        if not isinstance(message, dict):
            continue
        if message.get("kind") == "progress":
            if progress is not None:
                progress(IngestProgress(**message["progress"]))
        else:
            outcome = message
    return outcome


def _death(code: int, limit: int, outcome: dict[str, Any] | None, stderr: str) -> str:
    """How the child died, in words."""
    if outcome is not None and outcome.get("kind") == "memory":
        return (
            f"the import ran out of memory (the limit is {limit} bytes, WORLDSMITH_IMPORT_MAX_PROCESS_BYTES) "
            "and was stopped; nothing was committed"
        )
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
        return f"the import's process was killed by {name} (memory limit {limit} bytes); nothing was committed"
    detail = (outcome or {}).get("error") or stderr.strip().splitlines()[-1:] or ["no message"]
    return f"the import's process failed (exit code {code}): {detail if isinstance(detail, str) else detail[0]}"


def _remove_leftovers(workspace_root: Path, pid: int) -> None:
    """The staging folders and quarantine temp files of a dead child (named for its pid)."""
    for folder in WorkspaceLayout.of(workspace_root).staging_dir.glob(f".staging-{pid}-*"):
        shutil.rmtree(folder, ignore_errors=True)
    for temp in WorkspaceLayout.of(workspace_root).reports_dir.glob(f".*.{pid}.tmp"):
        temp.unlink(missing_ok=True)


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.buffer.write(orjson.dumps(message, option=orjson.OPT_APPEND_NEWLINE))
    sys.stdout.buffer.flush()


def _child_main() -> int:
    request = orjson.loads(sys.stdin.buffer.read())
    limit = int(request["memory_limit"])
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    def on_progress(report: IngestProgress) -> None:
        _emit({"kind": "progress", "progress": {name: getattr(report, name) for name in report.__slots__}})

    try:
        report = ingest_files(
            Path(request["workspace"]),
            request["paths"],
            request["dataset"],
            format=request["format"],
            strict=bool(request["strict"]),
            env=request["env"],
            progress=on_progress,
            redact=RedactionSettings.from_json(request["redact"]) if request.get("redact") else None,
        )
    except MemoryError:
        _emit({"kind": "memory"})
        return 3
    except ValueError as error:  # a usage error: bad dataset name or format
        _emit({"kind": "usage", "error": str(error)})
        return 2
    except Exception as error:
        if "OutOfMemory" not in type(error).__name__:  # DuckDB's and Arrow's own out-of-memory errors
            raise
        _emit({"kind": "memory"})
        return 3
    _emit({"kind": "report", "summary": report.summary()})
    return 0


if __name__ == "__main__":
    sys.exit(_child_main())
