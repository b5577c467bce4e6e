"""Runs import fuzz cases, each in a forked child under a memory and a wall-clock limit (used by
`test_import_fuzz.py`; not a test itself).

    python tests/traces/fuzz_runner.py cases.json results.json

The runner imports worldsmith and the importers' libraries once, then forks one child per case: the child caps
its address space at its starting size plus `memory` bytes (`RLIMIT_AS`, so an allocation past it fails) and
arms `alarm(wall)` (SIGALRM ends it past the limit), ingests the case's file into a fresh workspace and writes
the report summary and the temp files left behind. The runner records how each child ended and its peak RSS
(`wait4`), so a case that blew a limit shows up as killed, never as a hung or swapping test run.
"""

from __future__ import annotations

import os
import resource
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import inspect_ai.log  # noqa: F401 - imported once here, not in every child
import orjson
import pandas  # noqa: F401 - what an ingest imports on first use (0.3 s a child otherwise)
import pyarrow.parquet  # noqa: F401

import worldsmith.traces.importers  # noqa: F401
from worldsmith.workspace.ingest import ingest_files


def _vm_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmSize in /proc/self/status")


def _leftovers(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".staging-")
    )


def _run_case(case: dict[str, Any], out: Path) -> None:
    os.environ.update(case.get("env", {}))
    budget = _vm_bytes() + int(case["memory"])
    resource.setrlimit(resource.RLIMIT_AS, (budget, budget))
    signal.alarm(int(case["wall"]))
    root = Path(case["workspace"])
    report = ingest_files(root, [case["path"]], "fuzz", format=case.get("format"))
    summary = report.summary()
    out.write_bytes(orjson.dumps({"summary": summary, "leftovers": _leftovers(root)}))


def main(cases_path: str, results_path: str) -> int:
    cases = orjson.loads(Path(cases_path).read_bytes())
    results: dict[str, Any] = {}
    for case in cases:
        out = Path(case["workspace"]).with_suffix(".result.json")
        started = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                _run_case(case, out)
            except BaseException:  # noqa: BLE001 - reported to the test, which fails on it
                out.write_text(orjson.dumps({"crash": traceback.format_exc()}).decode())
                code = 1
            os._exit(code)
        _, status, usage = os.wait4(pid, 0)
        result: dict[str, Any] = orjson.loads(out.read_bytes()) if out.exists() else {}
        result["seconds"] = time.perf_counter() - started
        result["max_rss"] = usage.ru_maxrss * 1024
        result["signal"] = signal.Signals(os.WTERMSIG(status)).name if os.WIFSIGNALED(status) else None
        result["exit"] = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        results[case["name"]] = result
    Path(results_path).write_bytes(orjson.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
