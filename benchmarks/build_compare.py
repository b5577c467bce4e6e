"""Two checkouts' build cost side by side, interleaved in one run: a speed-up measured on the same loaded host.

    OMP_NUM_THREADS=1 nice -n 5 python benchmarks/build_compare.py BEFORE_REPO AFTER_REPO FILE
        [--sizes 100 300 1000] [--repeats 3] [--route-folds 5] [--out results/build_compare.json]

Each build is one `benchmarks/build.py --child FILE SIZE FOLDS` process of the named checkout (its own `lib` first on
PYTHONPATH), so the checkouts never share a process or an import. For every size the repeats alternate
before/after (before first on even repeats, after first on odd ones: a host whose load drifts hurts both alike).
Prints, per size, each side's median CPU seconds, peak RSS, the after/before ratio, the log-log slope from the
previous size and the after side's stage shares; `FILE` is a `build.py` data file (e.g. its `toolshop.jsonl`).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any


def child(repo: Path, path: Path, size: int, folds: int) -> dict[str, Any]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join([str(repo / "lib"), str(repo)])}
    done = subprocess.run([sys.executable, str(repo / "benchmarks" / "build.py"), "--child", str(path), str(size),
                           str(folds)], env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{repo}: the build of {size} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    cpu = statistics.median(run["cpu_s"] for run in runs)
    stages: dict[str, float] = {}
    for run in runs:
        for stage, seconds in run["stage_cpu_s"].items():
            stages[stage] = stages.get(stage, 0.0) + seconds / len(runs)
    return {"cpu_s": round(cpu, 2), "runs_cpu_s": [run["cpu_s"] for run in runs],
            "peak_rss_mb": max(run["peak_rss_mb"] for run in runs), "trajectories": runs[0]["trajectories"],
            "turns": runs[0]["turns"], "rules": runs[0]["rules"], "statuses": runs[0]["statuses"],
            "stage_cpu_s": {k: round(v, 3) for k, v in stages.items()}}


def slope(a: dict[str, Any] | None, b: dict[str, Any]) -> str:
    if a is None:
        return "-"
    return f"{math.log(b['cpu_s'] / a['cpu_s']) / math.log(b['trajectories'] / a['trajectories']):.2f}"


def shares(row: dict[str, Any]) -> str:
    total = sum(row["stage_cpu_s"].values()) or 1.0
    top = sorted(row["stage_cpu_s"].items(), key=lambda kv: -kv[1])[:4]
    return " ".join(f"{name} {seconds / total:.0%}" for name, seconds in top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("file", type=Path)
    parser.add_argument("--sizes", nargs="+", type=int, default=[100, 300, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--route-folds", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "build_compare.json")
    args = parser.parse_args(argv)
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    rows: list[dict[str, Any]] = []
    print(f"{'trajs':>6} {'turns':>6} {'before s':>9} {'after s':>8} {'ratio':>6} {'slope b':>7} {'slope a':>7} "
          f"{'RSS b/a MB':>11}  after's stage shares", flush=True)
    previous: dict[str, dict[str, Any]] | None = None
    for size in args.sizes:
        runs: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
        for repeat in range(args.repeats):
            for side in (("before", "after") if repeat % 2 == 0 else ("after", "before")):
                runs[side].append(child(sides[side], args.file, size, args.route_folds))
        row = {side: summary(found) for side, found in runs.items()}
        before, after = row["before"], row["after"]
        if before["rules"] != after["rules"] or before["statuses"] != after["statuses"]:
            print(f"  {size}: the books differ in rules or statuses: {before['statuses']} vs {after['statuses']}")
        print(f"{before['trajectories']:>6} {before['turns']:>6} {before['cpu_s']:>9.2f} {after['cpu_s']:>8.2f} "
              f"{after['cpu_s'] / before['cpu_s']:>6.2f} "
              f"{slope(previous and previous['before'], before):>7} {slope(previous and previous['after'], after):>7} "
              f"{before['peak_rss_mb']:>5.0f}/{after['peak_rss_mb']:<5.0f}  {shares(after)}", flush=True)
        rows.append({"size": size, **row})
        previous = row
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"before": str(sides["before"]), "after": str(sides["after"]),
                                    "file": str(args.file), "repeats": args.repeats, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
