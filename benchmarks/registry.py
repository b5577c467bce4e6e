"""What the one `Registry` costs: a lookup against a plain dict, and the first use of each extension point (the
built-ins, $VARIABLE plug-ins and the installed entry points, scanned once per process).

    OMP_NUM_THREADS=1 python benchmarks/registry.py [--repeats 5]

1. `Registry.get` and `name in registry` on a 50-item registry vs `dict[name]` (microseconds per call).
2. `importlib.metadata.entry_points(group=...)`: one scan of the installed distributions (what each registry pays
   once, on its first lookup).
3. Each extension point's first `names()` in a fresh process (the built-ins import on first use for world models and
   answer sources), via `worldsmith plugins --json`'s registries.

Prints the medians and writes benchmarks/results/registry.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import timeit
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")

from worldsmith.util.registry import Registry  # noqa: E402

RESULTS = Path(__file__).parent / "results" / "registry.json"
CALLS = 100_000
_FIRST_USE = """
import time, json
t0 = time.perf_counter()
from worldsmith.cli.extensions import extension_points
imported = time.perf_counter() - t0
out = {"import": imported}
for name, registry in extension_points().items():
    t = time.perf_counter()
    registry.names()
    out[name] = time.perf_counter() - t
print(json.dumps(out))
"""


def lookups() -> dict[str, float]:
    registry: Registry[int] = Registry("number")
    plain = {f"item{i}": i for i in range(50)}
    for name, value in plain.items():
        registry.register(name, value)
    registry.load()
    per_call = {
        "dict_getitem_us": timeit.timeit(lambda: plain["item25"], number=CALLS),
        "registry_get_us": timeit.timeit(lambda: registry.get("item25"), number=CALLS),
        "registry_contains_us": timeit.timeit(lambda: "item25" in registry, number=CALLS),
    }
    return {key: value / CALLS * 1e6 for key, value in per_call.items()}


def entry_point_scan() -> float:
    start = time.perf_counter()
    importlib.metadata.entry_points(group="worldsmith.metrics")
    return time.perf_counter() - start


def first_use() -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", _FIRST_USE], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    runs = [lookups() for _ in range(args.repeats)]
    lookup = {key: statistics.median(run[key] for run in runs) for key in runs[0]}
    scans = [entry_point_scan() for _ in range(args.repeats)]
    firsts = [first_use() for _ in range(max(1, args.repeats // 2))]
    first = {key: statistics.median(run[key] for run in firsts) for key in firsts[0]}
    result: dict[str, Any] = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"), "python": platform.python_version(),
        "machine": platform.machine(), "cpus": os.cpu_count(), "repeats": args.repeats,
        "lookup_us": {key: round(value, 3) for key, value in lookup.items()},
        "entry_point_scan_ms": round(statistics.median(scans) * 1e3, 2),
        "first_use_ms": {key: round(value * 1e3, 1) for key, value in first.items()},
    }
    for key, value in result["lookup_us"].items():
        print(f"{key:<24} {value:8.3f} us")
    print(f"{'entry_point_scan':<24} {result['entry_point_scan_ms']:8.2f} ms (one group, median)")
    for key, value in result["first_use_ms"].items():
        print(f"first use {key:<14} {value:8.1f} ms")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
