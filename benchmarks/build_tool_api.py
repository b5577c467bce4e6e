"""Worldbook build cost on tool-API conversations vs their number, for one or more checkouts side by side.

    OMP_NUM_THREADS=1 python benchmarks/build_tool_api.py EPISODES.jsonl [MORE.jsonl ...] [--sizes 100 300 1000]
        [--repeats 3] [--route-folds 0 5] [--code before=/path/to/old/lib --code after=lib]
        [--profile SIZE] [--out benchmarks/results/build_tool_api.json]

The episodes (native JSONL, e.g. BFCL recordings from `worldsmith collect bfcl` + `worldsmith export`) are pooled in a
stable order (sorted by a hash of the id), the first N written to `--prefix-dir`, and built with `build_simulator_book` (no validation, no stage
cache) at each size, with each `--route-folds` value (0: no route table; 5: the default). Every build runs in its own
process with `PYTHONPATH` set to the `--code` library, the codes interleaved within each repeat, and reports its CPU
seconds (`time.process_time`). Printed: the median of the repeats per code, size and folds, the log-log slope between
consecutive sizes and end to end; with `--profile SIZE`, the top functions (cProfile, cumulative and own time) of one
build of the last code at that size (`--profile-folds`, default 5).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("OMP_NUM_THREADS", "1")
REPO = Path(__file__).resolve().parents[1]


def load_episodes(paths: list[Path], size: int) -> list[Any]:
    from worldsmith.traces import Episode, read_traces

    episodes = [item for item in read_traces(paths) if isinstance(item, Episode)]
    episodes.sort(key=lambda e: hashlib.sha256(e.id.encode()).hexdigest())
    if len(episodes) < size:
        raise SystemExit(f"only {len(episodes)} episodes in {', '.join(map(str, paths))}; {size} asked for")
    return episodes[:size]


def write_prefixes(paths: list[Path], sizes: list[int], folder: Path) -> dict[int, Path]:
    """The first N pooled episodes of each size as one JSONL file, so a build's process reads only what it builds."""
    episodes = load_episodes(paths, max(sizes))
    folder.mkdir(parents=True, exist_ok=True)
    out: dict[int, Path] = {}
    for size in sizes:
        out[size] = folder / f"first-{size}.jsonl"
        out[size].write_text("".join(e.model_dump_json() + "\n" for e in episodes[:size]), encoding="utf-8")
    return out


def build_once(paths: list[Path], size: int, folds: int, profile: bool) -> dict[str, Any]:
    """One build in this process: its CPU seconds and rule count (and, asked, the profile's top rows)."""
    import time

    from worldsmith.sim import build_simulator_book

    episodes = load_episodes(paths, size)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    started = time.process_time()
    result = build_simulator_book(episodes, name="bench", route_folds=folds)
    cpu = time.process_time() - started
    out: dict[str, Any] = {"cpu_s": round(cpu, 3), "rules": len(result.book.rules),
                           "turns": sum(len(e.turns) for e in episodes)}
    if profiler is not None:
        import io
        import pstats

        profiler.disable()
        for sort in ("cumulative", "tottime"):
            text = io.StringIO()
            pstats.Stats(profiler, stream=text).sort_stats(sort).print_stats(25)
            out[f"profile_{sort}"] = text.getvalue()
    return out


def run_child(lib: Path, paths: list[Path], size: int, folds: int, profile: bool = False) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{REPO}", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, __file__, *map(str, paths), "--child", str(size), str(folds)]
    if profile:
        command.append("--child-profile")
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"build failed ({lib}, {size}, folds {folds}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def slope(sizes: list[int], seconds: list[float]) -> float | None:
    if len(sizes) < 2 or min(seconds) <= 0:
        return None
    return round(math.log(seconds[-1] / seconds[0]) / math.log(sizes[-1] / sizes[0]), 2)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("episodes", nargs="+", type=Path)
    parser.add_argument("--sizes", nargs="*", type=int, default=[100, 300, 1000])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--route-folds", nargs="*", type=int, default=[0, 5])
    parser.add_argument("--code", action="append", default=None, help="NAME=LIBDIR (default: this checkout's lib)")
    parser.add_argument("--profile", type=int, default=None, help="profile one build of the last code at this size")
    parser.add_argument("--profile-folds", type=int, default=5, help="the route folds of the profiled build")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--prefix-dir", type=Path, default=Path("/tmp/build_tool_api"),
                        help="where the first-N episode files are written")
    parser.add_argument("--child", nargs=2, type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-profile", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child is not None:
        print(json.dumps(build_once(args.episodes, args.child[0], args.child[1], args.child_profile)))
        return 0
    codes = dict(item.split("=", 1) for item in (args.code or [f"this={REPO / 'lib'}"]))
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in codes}
    prefixes = write_prefixes(args.episodes, sorted({*args.sizes, *([args.profile] if args.profile else [])}),
                              args.prefix_dir)
    for folds in args.route_folds:
        for size in args.sizes:
            for repeat in range(args.repeats):
                for name, lib in codes.items():
                    result = run_child(Path(lib), [prefixes[size]], size, folds)
                    runs[name].setdefault(f"{size}/{folds}", []).append(result)
                    print(f"{name:>8} n={size:<5} folds={folds} repeat {repeat + 1}: {result['cpu_s']:8.2f} cpu s "
                          f"({result['rules']} rules, {result['turns']} turns)", flush=True)
    summary: dict[str, Any] = {}
    for folds in args.route_folds:
        print(f"\nroute_folds={folds}: median CPU s of {args.repeats}")
        print(f"{'n':>6} " + " ".join(f"{name:>10}" for name in codes))
        for size in args.sizes:
            medians = [statistics.median(r["cpu_s"] for r in runs[name][f"{size}/{folds}"]) for name in codes]
            print(f"{size:>6} " + " ".join(f"{m:10.2f}" for m in medians))
        for name in codes:
            medians = [statistics.median(r["cpu_s"] for r in runs[name][f"{size}/{folds}"]) for size in args.sizes]
            steps = [slope(args.sizes[i:i + 2], medians[i:i + 2]) for i in range(len(args.sizes) - 1)]
            summary[f"{name}/folds={folds}"] = {"sizes": args.sizes, "median_cpu_s": medians,
                                                "slopes": steps, "slope": slope(args.sizes, medians)}
            print(f"  {name}: log-log slope {summary[f'{name}/folds={folds}']['slope']} (steps {steps})")
    if args.profile is not None:
        name, lib = list(codes.items())[-1]
        profiled = run_child(Path(lib), [prefixes[args.profile]], args.profile, args.profile_folds, profile=True)
        print(f"\nprofile of {name} at n={args.profile}, route_folds={args.profile_folds} "
              f"({profiled['cpu_s']} cpu s under cProfile)")
        print(profiled["profile_tottime"])
        print(profiled["profile_cumulative"])
        summary["profile"] = profiled
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"runs": runs, "summary": summary}, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
